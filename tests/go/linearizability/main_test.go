package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runOn writes `history` to a file and runs the checker on it, returning the exit status and
// what it printed.
func runOn(t *testing.T, history string, extra ...string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "history.json")
	if err := os.WriteFile(path, []byte(history), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	args := append(extra, path)
	status := run(args, &stdout, &stderr)
	return status, stdout.String(), stderr.String()
}

// Two clients on key a: a write, reads, a cas that wins and one that loses on the generation,
// and a cas whose outcome is unknown whose effect a later read sees.
const linearizableHistory = `[
 {"client": 0, "key": "a", "kind": "write", "input": {"value": 1}, "output": {"ok": true}, "call_ns": 0, "return_ns": 10},
 {"client": 0, "key": "a", "kind": "read", "output": {"found": true, "value": 1, "generation": 1}, "call_ns": 20, "return_ns": 30},
 {"client": 1, "key": "a", "kind": "read", "output": {"found": true, "value": 1, "generation": 1}, "call_ns": 21, "return_ns": 31},
 {"client": 0, "key": "a", "kind": "cas", "input": {"generation": 1, "value": 2}, "output": {"ok": true}, "call_ns": 40, "return_ns": 60},
 {"client": 1, "key": "a", "kind": "cas", "input": {"generation": 1, "value": 3}, "output": {"ok": false, "error": "generation"}, "call_ns": 41, "return_ns": 61},
 {"client": 1, "key": "a", "kind": "cas", "input": {"generation": 2, "value": 4}, "unknown": true, "call_ns": 70, "return_ns": 80},
 {"client": 2, "key": "a", "kind": "read", "output": {"found": true, "value": 4, "generation": 3}, "call_ns": 90, "return_ns": 100},
 {"client": 2, "key": "a", "kind": "cas", "input": {"generation": 3, "value": 5}, "output": {"ok": false, "error": "timeout"}, "call_ns": 110, "return_ns": 120},
 {"client": 0, "key": "a", "kind": "read", "output": {"found": true, "value": 4, "generation": 3}, "call_ns": 130, "return_ns": 140},
 {"client": 0, "key": "b", "kind": "read", "output": {"found": false}, "call_ns": 0, "return_ns": 5},
 {"client": 1, "key": "b", "kind": "cas", "input": {"generation": 0, "value": 9}, "unknown": true, "call_ns": 10, "return_ns": 0},
 {"client": 0, "key": "b", "kind": "read", "output": {"found": false}, "call_ns": 50, "return_ns": 60}
]`

// Key a: a read that begins after a cas replaced the value still returns the old one (a stale
// read). Key c is fine.
const staleReadHistory = `[
 {"client": 0, "key": "a", "kind": "write", "input": {"value": 1}, "output": {"ok": true}, "call_ns": 0, "return_ns": 10},
 {"client": 0, "key": "a", "kind": "cas", "input": {"generation": 1, "value": 2}, "output": {"ok": true}, "call_ns": 20, "return_ns": 30},
 {"client": 1, "key": "a", "kind": "read", "output": {"found": true, "value": 1, "generation": 1}, "call_ns": 40, "return_ns": 50},
 {"client": 1, "key": "c", "kind": "write", "input": {"value": 7}, "output": {"ok": true}, "call_ns": 0, "return_ns": 10},
 {"client": 1, "key": "c", "kind": "read", "output": {"found": true, "value": 7, "generation": 1}, "call_ns": 20, "return_ns": 30}
]`

// A generation error that no state justifies: the generation was 1 throughout.
const unjustifiedGenerationErrorHistory = `[
 {"client": 0, "key": "a", "kind": "write", "input": {"value": 1}, "output": {"ok": true}, "call_ns": 0, "return_ns": 10},
 {"client": 1, "key": "a", "kind": "cas", "input": {"generation": 1, "value": 2}, "output": {"ok": false, "error": "generation"}, "call_ns": 20, "return_ns": 30},
 {"client": 0, "key": "a", "kind": "read", "output": {"found": true, "value": 1, "generation": 1}, "call_ns": 40, "return_ns": 50}
]`

// An acknowledged write that a later read does not see (a lost write).
const lostWriteHistory = `[
 {"client": 0, "key": "a", "kind": "write", "input": {"value": 1}, "output": {"ok": true}, "call_ns": 0, "return_ns": 10},
 {"client": 1, "key": "a", "kind": "read", "output": {"found": false}, "call_ns": 20, "return_ns": 30}
]`

// Two cas with the same expected generation both acknowledged: only one can have matched.
const doubleCasHistory = `[
 {"client": 0, "key": "a", "kind": "write", "input": {"value": 1}, "output": {"ok": true}, "call_ns": 0, "return_ns": 10},
 {"client": 0, "key": "a", "kind": "cas", "input": {"generation": 1, "value": 2}, "output": {"ok": true}, "call_ns": 20, "return_ns": 30},
 {"client": 1, "key": "a", "kind": "cas", "input": {"generation": 1, "value": 3}, "output": {"ok": true}, "call_ns": 21, "return_ns": 31}
]`

func TestALinearizableHistoryPasses(t *testing.T) {
	status, stdout, stderr := runOn(t, linearizableHistory)
	if status != exitLinearizable {
		t.Fatalf("status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	if !strings.Contains(stdout, "2 keys, 12 operations (2 with unknown outcome)") {
		t.Fatalf("summary: %q", stdout)
	}
}

func TestAStaleReadIsAViolationOfItsKeyOnly(t *testing.T) {
	html := filepath.Join(t.TempDir(), "violation.html")
	status, stdout, stderr := runOn(t, staleReadHistory, "-visualize", html)
	if status != exitViolation {
		t.Fatalf("status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	if !strings.Contains(stdout, "NOT linearizable: key a ") || strings.Contains(stdout, "key c") {
		t.Fatalf("expected key a only: %q", stdout)
	}
	drawing, err := os.ReadFile(html)
	if err != nil || !bytes.Contains(drawing, []byte("<html")) {
		t.Fatalf("no visualization at %s: %v", html, err)
	}
}

func TestAnUnjustifiedGenerationErrorIsAViolation(t *testing.T) {
	if status, stdout, _ := runOn(t, unjustifiedGenerationErrorHistory); status != exitViolation {
		t.Fatalf("status %d, stdout %q", status, stdout)
	}
}

func TestALostWriteIsAViolation(t *testing.T) {
	if status, stdout, _ := runOn(t, lostWriteHistory); status != exitViolation {
		t.Fatalf("status %d, stdout %q", status, stdout)
	}
}

func TestTwoCasOnOneGenerationBothAcknowledgedIsAViolation(t *testing.T) {
	if status, stdout, _ := runOn(t, doubleCasHistory); status != exitViolation {
		t.Fatalf("status %d, stdout %q", status, stdout)
	}
}

func TestAnUnknownCasMayHaveTakenEffectOrNot(t *testing.T) {
	// Taken effect: read 2 after it. Not taken effect: read 1 after it. Both linearizable.
	for _, seen := range []string{`"value": 2, "generation": 2`, `"value": 1, "generation": 1`} {
		history := `[
 {"client": 0, "key": "a", "kind": "write", "input": {"value": 1}, "output": {"ok": true}, "call_ns": 0, "return_ns": 10},
 {"client": 0, "key": "a", "kind": "cas", "input": {"generation": 1, "value": 2}, "unknown": true, "call_ns": 20},
 {"client": 1, "key": "a", "kind": "read", "output": {"found": true, ` + seen + `}, "call_ns": 100, "return_ns": 110}
]`
		if status, stdout, stderr := runOn(t, history); status != exitLinearizable {
			t.Fatalf("seen %s: status %d, stdout %q, stderr %q", seen, status, stdout, stderr)
		}
	}
}

func TestBadInputExitsTwo(t *testing.T) {
	cases := map[string]string{
		"not json":        `{`,
		"unknown kind":    `[{"client": 0, "key": "a", "kind": "incr", "call_ns": 0, "return_ns": 1}]`,
		"no key":          `[{"client": 0, "kind": "read", "output": {"found": false}, "call_ns": 0, "return_ns": 1}]`,
		"cas without gen": `[{"client": 0, "key": "a", "kind": "cas", "input": {"value": 1}, "output": {"ok": true}, "call_ns": 0, "return_ns": 1}]`,
		"return first":    `[{"client": 0, "key": "a", "kind": "read", "output": {"found": false}, "call_ns": 5, "return_ns": 1}]`,
		"unknown field":   `[{"client": 0, "key": "a", "kind": "read", "output": {"found": false}, "call_ns": 0, "return_ns": 1, "x": 1}]`,
		"read no found":   `[{"client": 0, "key": "a", "kind": "read", "output": {}, "call_ns": 0, "return_ns": 1}]`,
	}
	for name, history := range cases {
		if status, stdout, _ := runOn(t, history); status != exitBadInput {
			t.Errorf("%s: status %d, stdout %q", name, status, stdout)
		}
	}
}

func TestGenerationsWrapFromTheMaximumToOne(t *testing.T) {
	if nextGeneration(generationMax) != 1 || nextGeneration(1) != 2 {
		t.Fatal("generation wrap")
	}
}
