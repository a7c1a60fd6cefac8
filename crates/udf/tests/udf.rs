//! End-to-end tests of the UDF runtime through its public API.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use udf::{Limits, Modules, UdfError, UdfRecord, UdfRuntime, Value};

/// An in-memory record with Aerospike's staged-write semantics.
#[derive(Default)]
struct MemRecord {
    exists: bool,
    stored: BTreeMap<String, Value>,
    staged: BTreeMap<String, Value>,
    ttl: u32,
    generation: u32,
    updates: u32,
}

impl UdfRecord for MemRecord {
    fn exists(&self) -> bool {
        self.exists
    }
    fn bin(&self, name: &str) -> Option<Value> {
        match self.staged.get(name) {
            Some(Value::Nil) => None,
            Some(v) => Some(v.clone()),
            None => self.stored.get(name).cloned(),
        }
    }
    fn set_bin(&mut self, name: &str, value: Value) {
        self.staged.insert(name.to_owned(), value);
    }
    fn bin_names(&self) -> Vec<String> {
        self.stored.keys().cloned().collect()
    }
    fn ttl(&self) -> u32 {
        self.ttl
    }
    fn set_ttl(&mut self, ttl: u32) {
        self.ttl = ttl;
    }
    fn generation(&self) -> u32 {
        self.generation
    }
    fn last_update_ms(&self) -> u64 {
        1_700_000_000_000
    }
    fn set_name(&self) -> Option<String> {
        Some("demo".to_owned())
    }
    fn digest(&self) -> [u8; 20] {
        [7; 20]
    }
    fn key(&self) -> Option<Value> {
        Some(Value::Str("k1".to_owned()))
    }
    fn device_size(&self) -> u64 {
        128
    }
    fn create(&mut self) -> i32 {
        if self.exists {
            return 1;
        }
        self.exists = true;
        self.update()
    }
    fn update(&mut self) -> i32 {
        if !self.exists {
            return -2;
        }
        for (k, v) in std::mem::take(&mut self.staged) {
            if v == Value::Nil {
                self.stored.remove(&k);
            } else {
                self.stored.insert(k, v);
            }
        }
        self.generation += 1;
        self.updates += 1;
        0
    }
    fn remove(&mut self) -> i32 {
        if !self.exists {
            return 1;
        }
        self.exists = false;
        self.stored.clear();
        self.staged.clear();
        0
    }
}

const LIMITS: Limits = Limits {
    time_ms: 1000,
    memory_bytes: 16 * 1024 * 1024,
};

const DEMO: &str = r#"
function incr(rec)
  rec['a'] = rec['a'] + 1
  aerospike:update(rec)
  return rec['a']
end

function make(rec, v)
  if aerospike:exists(rec) then return 'exists' end
  rec['a'] = v
  return aerospike:create(rec)
end

function drop(rec)
  return aerospike:remove(rec)
end

function echo(rec, ...)
  return ...
end

function lists(rec)
  local l = list{1, 2, 3}
  list.append(l, 'x')
  list.prepend(l, 0)
  l[6] = 9.5
  local total = 0
  for v in list.iterator(list.take(l, 4)) do total = total + v end
  list.append(l, total)
  list.append(l, list.size(l))
  return l
end

function maps(rec)
  local m = map{a = 1}
  m['b'] = list{true, false}
  m[7] = 'seven'
  local n = 0
  for k in map.keys(m) do n = n + 1 end
  m['n'] = n
  map.remove(m, 'a')
  m['merged'] = map.size(map.merge(map{x = 1}, map{y = 2}))
  return m
end

function meta(rec)
  local names = record.bin_names(rec)
  local d = record.digest(rec)
  record.set_ttl(rec, 3600)
  return list{record.ttl(rec), record.gen(rec), record.last_update_time(rec),
    record.setname(rec), record.set_name(rec), bytes.size(d), d[1], record.key(rec),
    #names, record.device_size(rec), tostring(rec)}
end

function blob(rec)
  local b = bytes(4)
  bytes.set_byte(b, 1, 7)
  b[2] = 255
  bytes.append_string(b, 'hi')
  bytes.append_int16(b, 258)
  return list{bytes.size(b), bytes.get_byte(b, 2), bytes.get_int16(b, 5), b}
end

function fail(rec)
  error('the error text')
end

function badbin(rec)
  rec['t'] = {1, 2}
end

function logs(rec)
  info('hello %s', 'world')
  warn('careful')
  debug('dbg %d', 1)
  trace('trc')
  return 1
end
"#;

fn setup(name: &str, source: &str) -> (Arc<Modules>, UdfRuntime) {
    let modules = Arc::new(Modules::new());
    modules.put(name, source).unwrap();
    let rt = UdfRuntime::new(modules.clone());
    (modules, rt)
}

fn existing(a: i64) -> MemRecord {
    let mut rec = MemRecord {
        exists: true,
        ..MemRecord::default()
    };
    rec.stored.insert("a".to_owned(), Value::Int(a));
    rec
}

#[test]
fn read_modify_write() {
    let (_, mut rt) = setup("demo.lua", DEMO);
    let mut rec = existing(41);
    let v = rt.apply("demo", "incr", vec![], &mut rec, LIMITS).unwrap();
    assert_eq!(v, Value::Int(42));
    assert_eq!(rec.stored["a"], Value::Int(42));
    assert_eq!(rec.updates, 1);
    let v = rt
        .apply("demo.lua", "incr", vec![], &mut rec, LIMITS)
        .unwrap();
    assert_eq!(v, Value::Int(43));
}

#[test]
fn create_and_remove() {
    let (_, mut rt) = setup("demo.lua", DEMO);
    let mut rec = MemRecord::default();
    let v = rt
        .apply("demo", "make", vec![Value::Int(5)], &mut rec, LIMITS)
        .unwrap();
    assert_eq!(v, Value::Int(0));
    assert!(rec.exists);
    assert_eq!(rec.stored["a"], Value::Int(5));
    let v = rt
        .apply("demo", "make", vec![Value::Int(6)], &mut rec, LIMITS)
        .unwrap();
    assert_eq!(v, Value::Str("exists".to_owned()));
    let v = rt.apply("demo", "drop", vec![], &mut rec, LIMITS).unwrap();
    assert_eq!(v, Value::Int(0));
    assert!(!rec.exists);
}

#[test]
fn lists_round_trip() {
    let (_, mut rt) = setup("demo.lua", DEMO);
    let v = rt
        .apply("demo", "lists", vec![], &mut MemRecord::default(), LIMITS)
        .unwrap();
    let expected = Value::List(vec![
        Value::Int(0),
        Value::Int(1),
        Value::Int(2),
        Value::Int(3),
        Value::Str("x".to_owned()),
        Value::Float(9.5),
        Value::Int(6),
        Value::Int(7),
    ]);
    assert_eq!(v, expected);
}

#[test]
fn maps_round_trip() {
    let (_, mut rt) = setup("demo.lua", DEMO);
    let v = rt
        .apply("demo", "maps", vec![], &mut MemRecord::default(), LIMITS)
        .unwrap();
    let Value::Map(entries) = v else {
        panic!("not a map: {v:?}");
    };
    let get = |k: Value| {
        entries
            .iter()
            .find(|(kk, _)| *kk == k)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(get(Value::from("a")), None);
    assert_eq!(
        get(Value::from("b")),
        Some(Value::List(vec![Value::Bool(true), Value::Bool(false)]))
    );
    assert_eq!(get(Value::Int(7)), Some(Value::from("seven")));
    assert_eq!(get(Value::from("n")), Some(Value::Int(3)));
    assert_eq!(get(Value::from("merged")), Some(Value::Int(2)));
}

#[test]
fn metadata() {
    let (_, mut rt) = setup("demo.lua", DEMO);
    let mut rec = existing(1);
    rec.ttl = 100;
    rec.generation = 3;
    let v = rt.apply("demo", "meta", vec![], &mut rec, LIMITS).unwrap();
    assert_eq!(
        v,
        Value::List(vec![
            Value::Int(3600),
            Value::Int(3),
            Value::Int(1_700_000_000_000),
            Value::from("demo"),
            Value::from("demo"),
            Value::Int(20),
            Value::Int(7),
            Value::from("k1"),
            Value::Int(1),
            Value::Int(128),
            Value::from("Record()"),
        ])
    );
    assert_eq!(rec.ttl, 3600);
}

#[test]
fn bytes_api() {
    let (_, mut rt) = setup("demo.lua", DEMO);
    let v = rt
        .apply("demo", "blob", vec![], &mut MemRecord::default(), LIMITS)
        .unwrap();
    assert_eq!(
        v,
        Value::List(vec![
            Value::Int(6),
            Value::Int(255),
            Value::Int(258),
            Value::Bytes(vec![7, 255, b'h', b'i', 1, 2]),
        ])
    );
}

#[test]
fn arguments_round_trip_every_kind() {
    let (_, mut rt) = setup("demo.lua", DEMO);
    let args = vec![
        Value::Nil,
        Value::Bool(true),
        Value::Int(-7),
        Value::Int(i64::MAX),
        Value::Float(2.5),
        Value::Str("héllo".to_owned()),
        Value::Bytes(vec![0, 1, 255]),
        Value::List(vec![Value::Int(1), Value::List(vec![Value::from("n")])]),
        Value::Map(vec![
            (Value::from("k"), Value::Int(1)),
            (
                Value::Int(2),
                Value::Map(vec![(Value::Bool(false), Value::Float(0.5))]),
            ),
        ]),
        Value::GeoJson(r#"{"type":"Point","coordinates":[1,2]}"#.to_owned()),
    ];
    for arg in args {
        let v = rt
            .apply(
                "demo",
                "echo",
                vec![arg.clone()],
                &mut MemRecord::default(),
                LIMITS,
            )
            .unwrap();
        assert_eq!(v, arg);
    }
}

#[test]
fn lua_error_has_aerospike_shape() {
    let (_, mut rt) = setup("demo.lua", DEMO);
    let err = rt
        .apply("demo", "fail", vec![], &mut MemRecord::default(), LIMITS)
        .unwrap_err();
    let line = DEMO
        .lines()
        .position(|l| l.contains("the error text"))
        .unwrap()
        + 1;
    let expected = format!("/opt/aerospike/usr/udf/lua/demo.lua:{line}: the error text");
    assert_eq!(
        err,
        UdfError::Lua {
            message: expected.clone()
        }
    );
    assert_eq!(err.failure_message(), expected);

    let err = rt
        .apply("demo", "nope", vec![], &mut MemRecord::default(), LIMITS)
        .unwrap_err();
    assert_eq!(err.failure_message(), "function not found");

    let err = rt
        .apply("demo", "badbin", vec![], &mut MemRecord::default(), LIMITS)
        .unwrap_err();
    assert!(
        err.failure_message()
            .ends_with("can't set bin t to unsupported type"),
        "{err:?}"
    );
    let err = rt
        .apply("other", "f", vec![], &mut MemRecord::default(), LIMITS)
        .unwrap_err();
    assert!(matches!(err, UdfError::ModuleNotFound { .. }), "{err:?}");
}

#[test]
fn logging_works() {
    let (_, mut rt) = setup("demo.lua", DEMO);
    let v = rt
        .apply("demo", "logs", vec![], &mut MemRecord::default(), LIMITS)
        .unwrap();
    assert_eq!(v, Value::Int(1));
}

#[test]
fn compile_error_is_refused_with_position() {
    let modules = Arc::new(Modules::new());
    let err = modules
        .put("bad.lua", "function f(rec)\n  return 1 +\nend\n")
        .unwrap_err();
    let UdfError::Compile {
        file,
        line,
        message,
    } = &err
    else {
        panic!("not a compile error: {err:?}");
    };
    assert_eq!(file, "bad.lua");
    assert_eq!(*line, 3);
    assert_eq!(message, "unexpected symbol near 'end'");
    assert_eq!(
        err.info_response(),
        "error=compile_error;file=bad.lua;line=3;message=dW5leHBlY3RlZCBzeW1ib2wgbmVhciAnZW5kJw=="
    );
    // A top-level runtime error counts too, as in Aerospike's validation.
    let err = modules
        .put("boom.lua", "local x = nil\nx.y = 1\n")
        .unwrap_err();
    assert!(matches!(err, UdfError::Compile { line: 2, .. }), "{err:?}");
    assert!(modules.list().is_empty());
    assert!(matches!(
        modules.put("../x.lua", "").unwrap_err(),
        UdfError::InvalidName { .. }
    ));
    assert!(matches!(
        modules.put("noext", "").unwrap_err(),
        UdfError::InvalidName { .. }
    ));
}

#[test]
fn store_api_and_reload() {
    let modules = Arc::new(Modules::new());
    modules
        .put("m.lua", "function f(rec) return 1 end")
        .unwrap();
    let mut rt = UdfRuntime::new(modules.clone());
    let one = rt
        .apply("m", "f", vec![], &mut MemRecord::default(), LIMITS)
        .unwrap();
    assert_eq!(one, Value::Int(1));
    let list = modules.list();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].name, "m.lua");
    // SHA-1 of the content, hex.
    let expected = {
        let mut h = sha1_smol::Sha1::new();
        h.update(b"function f(rec) return 1 end");
        h.digest().to_string()
    };
    assert_eq!(list[0].hash, expected);
    assert_eq!(list[0].hash.len(), 40);

    modules
        .put("m.lua", "function f(rec) return 2 end")
        .unwrap();
    let two = rt
        .apply("m", "f", vec![], &mut MemRecord::default(), LIMITS)
        .unwrap();
    assert_eq!(two, Value::Int(2));
    assert_eq!(
        modules.get("m.lua").unwrap(),
        "function f(rec) return 2 end"
    );
    assert_eq!(modules.iter().len(), 1);

    assert!(modules.remove("m.lua"));
    let err = rt
        .apply("m", "f", vec![], &mut MemRecord::default(), LIMITS)
        .unwrap_err();
    assert!(matches!(err, UdfError::ModuleNotFound { .. }), "{err:?}");
}

#[test]
fn require_registered_module_and_reload_dependency() {
    let modules = Arc::new(Modules::new());
    modules
        .put(
            "lib.lua",
            "local M = {}\nfunction M.v() return 10 end\nreturn M",
        )
        .unwrap();
    modules
        .put(
            "app.lua",
            "local lib = require('lib')\nfunction f(rec) return lib.v() end",
        )
        .unwrap();
    let mut rt = UdfRuntime::new(modules.clone());
    let v = rt
        .apply("app", "f", vec![], &mut MemRecord::default(), LIMITS)
        .unwrap();
    assert_eq!(v, Value::Int(10));
    modules
        .put(
            "lib.lua",
            "local M = {}\nfunction M.v() return 20 end\nreturn M",
        )
        .unwrap();
    let v = rt
        .apply("app", "f", vec![], &mut MemRecord::default(), LIMITS)
        .unwrap();
    assert_eq!(v, Value::Int(20));
}

#[test]
fn infinite_loop_times_out_and_runtime_recovers() {
    let src = "function spin(rec) while true do end end\n\
               function sneaky(rec) while true do pcall(function() while true do end end) end end\n\
               function ok(rec) return 'fine' end";
    let (_, mut rt) = setup("loop.lua", src);
    let limits = Limits {
        time_ms: 50,
        memory_bytes: 0,
    };
    for f in ["spin", "sneaky"] {
        let start = std::time::Instant::now();
        let err = rt
            .apply("loop", f, vec![], &mut MemRecord::default(), limits)
            .unwrap_err();
        assert!(matches!(err, UdfError::Timeout { .. }), "{f}: {err:?}");
        assert!(
            err.failure_message().ends_with("UDF Execution Timeout"),
            "{err:?}"
        );
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
        let v = rt
            .apply("loop", "ok", vec![], &mut MemRecord::default(), limits)
            .unwrap();
        assert_eq!(v, Value::from("fine"));
    }
}

#[test]
fn allocation_bomb_hits_memory_limit() {
    let src = "function strings(rec) local t = {} local s = 'x' while true do s = s .. s t[#t+1] = s end end\n\
               function lists(rec) local l = list() while true do list.append(l, 'abcdefghij') end end\n\
               function swallow(rec) local t = {} while true do pcall(function() t[#t+1] = string.rep('y', 1024) end) end end\n\
               function ok(rec) return 'fine' end";
    let (_, mut rt) = setup("bomb.lua", src);
    let limits = Limits {
        time_ms: 10_000,
        memory_bytes: 8 * 1024 * 1024,
    };
    for f in ["strings", "lists", "swallow"] {
        let err = rt
            .apply("bomb", f, vec![], &mut MemRecord::default(), limits)
            .unwrap_err();
        assert!(matches!(err, UdfError::Memory { .. }), "{f}: {err:?}");
        let v = rt
            .apply("bomb", "ok", vec![], &mut MemRecord::default(), limits)
            .unwrap();
        assert_eq!(v, Value::from("fine"));
    }
}

#[test]
fn sandbox_escapes_are_refused() {
    let src = r#"
function io_open(rec) return io.open('/etc/passwd') end
function os_execute(rec) return os.execute('true') end
function req(rec) return require('os') end
function req_file(rec) return require('/etc/passwd') end
function bytecode(rec) local f = function() return 1 end return assert(load(string.dump(f)))() end
function dbg(rec) return debug.getinfo(1) end
function loadlib(rec) return package.loadlib('libc.so.6', 'system') end
function dofile_(rec) return dofile('/etc/passwd') end
function text_load(rec) return load('return 1 + 1')() end
function os_time(rec) return type(os.time()) end
"#;
    let (_, mut rt) = setup("sand.lua", src);
    let refusals = [
        ("io_open", "attempt to index a nil value (global 'io')"),
        (
            "os_execute",
            "attempt to call a nil value (field 'execute')",
        ),
        ("req", "module 'os' not found"),
        ("req_file", "module '/etc/passwd' not found"),
        ("bytecode", "attempt to load a binary chunk (mode is 't')"),
        ("dbg", "attempt to index a function value (global 'debug')"),
        ("loadlib", "attempt to index a nil value (global 'package')"),
        ("dofile_", "attempt to call a nil value (global 'dofile')"),
    ];
    for (f, why) in refusals {
        let r = rt.apply("sand", f, vec![], &mut MemRecord::default(), LIMITS);
        let Err(UdfError::Lua { message }) = &r else {
            panic!("{f}: {r:?}");
        };
        assert!(message.contains(why), "{f}: {message}");
    }
    let v = rt
        .apply(
            "sand",
            "text_load",
            vec![],
            &mut MemRecord::default(),
            LIMITS,
        )
        .unwrap();
    assert_eq!(v, Value::Int(2));
    let v = rt
        .apply("sand", "os_time", vec![], &mut MemRecord::default(), LIMITS)
        .unwrap();
    assert_eq!(v, Value::from("number"));
}

#[test]
fn self_containing_list_does_not_hang() {
    let src = "function cyc(rec) local l = list() list.append(l, l) list.concat(l, l) return l end\n\
               function tbl(rec) return {1, 2} end";
    let (_, mut rt) = setup("cyc.lua", src);
    let err = rt
        .apply("cyc", "cyc", vec![], &mut MemRecord::default(), LIMITS)
        .unwrap_err();
    assert!(err.failure_message().contains("too deep"), "{err:?}");
    // Lua tables are not values, as in Aerospike.
    let v = rt
        .apply("cyc", "tbl", vec![], &mut MemRecord::default(), LIMITS)
        .unwrap();
    assert_eq!(v, Value::Nil);
}

#[test]
fn runtime_is_send() {
    fn assert_send<T: Send>() {}
    assert_send::<UdfRuntime>();
    assert_send::<Arc<Modules>>();
}
