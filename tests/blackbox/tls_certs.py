"""Test certificates made with the `openssl` command: an authority, and certificates it signs
for server names and client users. Keys are P-256, as TLS deployments commonly use."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Pair:
    cert: Path
    key: Path


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


def authority(directory: Path, name: str = "Osprey Test CA") -> Pair:
    """A self-signed certificate authority."""
    pair = Pair(directory / f"{name.replace(' ', '_')}.pem", directory / f"{name.replace(' ', '_')}.key")
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", pair.key, "-out", pair.cert, "-days", "3650", "-subj", f"/CN={name}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return pair


def issue(ca: Pair, directory: Path, common_name: str, dns: list[str] | None = None,
          ips: list[str] | None = None, stem: str | None = None, serial: int | None = None) -> Pair:
    """A certificate for `common_name` signed by `ca`, good for servers and clients alike, with
    the DNS names and IP addresses given as subject alternative names."""
    stem = stem or common_name
    pair = Pair(directory / f"{stem}.pem", directory / f"{stem}.key")
    csr = directory / f"{stem}.csr"
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", pair.key, "-out", csr, "-subj", f"/CN={common_name}")
    names = [f"DNS:{d}" for d in dns or []] + [f"IP:{i}" for i in ips or []]
    extensions = directory / f"{stem}.ext"
    lines = ["extendedKeyUsage=serverAuth,clientAuth", "basicConstraints=CA:FALSE"]
    if names:
        lines.append("subjectAltName=" + ",".join(names))
    extensions.write_text("\n".join(lines) + "\n")
    serial_args = ["-set_serial", str(serial)] if serial is not None else ["-CAcreateserial"]
    _openssl("x509", "-req", "-in", csr, "-CA", ca.cert, "-CAkey", ca.key, *serial_args,
             "-out", pair.cert, "-days", "365", "-extfile", extensions)
    return pair
