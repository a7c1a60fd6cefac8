//! Stream UDFs (aggregations) through the public API: the operations a
//! stream function composes, what the server's half of them emits, the
//! read-only records, errors and limits.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use udf::{Limits, Modules, UdfError, UdfRecord, UdfRuntime, Value};

/// A record of a stream's input: bins and metadata, no writes.
#[derive(Clone, Default)]
struct Row {
    bins: Vec<(String, Value)>,
    digest: [u8; 20],
    set_name: Option<String>,
    generation: u32,
}

impl UdfRecord for Row {
    fn exists(&self) -> bool {
        true
    }
    fn bin(&self, name: &str) -> Option<Value> {
        self.bins
            .iter()
            .find(|(bin, _)| bin == name)
            .map(|(_, v)| v.clone())
    }
    fn set_bin(&mut self, _: &str, _: Value) {
        panic!("a stream record must never be written");
    }
    fn bin_names(&self) -> Vec<String> {
        self.bins.iter().map(|(name, _)| name.clone()).collect()
    }
    fn ttl(&self) -> u32 {
        100
    }
    fn set_ttl(&mut self, _: u32) {
        panic!("a stream record must never be written");
    }
    fn generation(&self) -> u32 {
        self.generation
    }
    fn last_update_ms(&self) -> u64 {
        0
    }
    fn set_name(&self) -> Option<String> {
        self.set_name.clone()
    }
    fn digest(&self) -> [u8; 20] {
        self.digest
    }
    fn key(&self) -> Option<Value> {
        None
    }
    fn device_size(&self) -> u64 {
        64
    }
    fn create(&mut self) -> i32 {
        panic!("a stream record must never be written");
    }
    fn update(&mut self) -> i32 {
        panic!("a stream record must never be written");
    }
    fn remove(&mut self) -> i32 {
        panic!("a stream record must never be written");
    }
}

const LIMITS: Limits = Limits {
    time_ms: 1000,
    memory_bytes: 16 * 1024 * 1024,
};

const AGG: &str = r#"
local function one(r) return 1 end
local function add(a, b) return a + b end

function count(s)
  return s : map(one) : reduce(add)
end

function sum(s, bin)
  return s : map(function(r) return r[bin] end) : reduce(add)
end

function sum_above(s, bin, floor)
  return s : filter(function(r) return r[bin] > floor end)
           : map(function(r) return r[bin] end) : reduce(add)
end

function values(s, bin)
  return s : map(function(r) return r[bin] end)
end

function by_color(s)
  local function fold(m, r)
    m[r['color']] = (m[r['color']] or 0) + 1
    return m
  end
  local function merge(a, b) return map.merge(a, b, add) end
  return s : aggregate(map(), fold) : reduce(merge)
end

function count_then_scale(s)
  return s : map(one) : reduce(add) : map(function(n) return n * 10 end)
end

function ones(s)
  return s : aggregate(0, function(acc, r) return acc + 1 end)
end

function groups(s)
  return s : map(function(r) return r['n'] end) : groupby(function(n) return n % 3 end)
end

function metadata(s)
  return s : map(function(r)
    return map{set = record.setname(r), gen = record.gen(r), ttl = record.ttl(r),
      d = record.digest(r)[1], bins = record.numbins(r)}
  end)
end

function boom(s)
  local function bad(r) error('boom') end
  return s : map(bad)
end

function writes(s)
  return s : map(function(r) r['n'] = 1; return 1 end)
end

function updates(s)
  return s : map(function(r) return aerospike:update(r) end)
end

function forever(s)
  return s : map(function(r) while true do end end)
end

function hoard(s)
  local kept = {}
  return s : map(function(r)
    for i = 1, 100000000 do kept[i] = string.rep('x', 100) .. i end
  end)
end

function not_a_stream(s)
  return 7
end

function tables(s)
  return s : map(function(r) return {1, 2} end)
end
"#;

fn runtime() -> UdfRuntime {
    let modules = Arc::new(Modules::new());
    modules.put("agg.lua", AGG).unwrap();
    UdfRuntime::new(modules)
}

/// Records with bin `n` = 1..=count and `color` cycling red, green, blue.
fn rows(count: i64) -> Vec<Row> {
    let colors = ["red", "green", "blue"];
    (1..=count)
        .map(|n| Row {
            bins: vec![
                ("n".to_owned(), Value::Int(n)),
                ("color".to_owned(), Value::from(colors[(n % 3) as usize])),
            ],
            digest: [u8::try_from(n % 256).unwrap(); 20],
            set_name: Some("people".to_owned()),
            generation: 3,
        })
        .collect()
}

/// Runs `function` over `input` and returns what it emitted, with how many
/// times the input was asked for a record.
fn run_counting(
    rt: &mut UdfRuntime,
    function: &str,
    args: Vec<Value>,
    input: Vec<Row>,
    limits: Limits,
) -> (Result<Vec<Value>, UdfError>, usize) {
    let mut records = input.into_iter();
    let mut reads = 0;
    let mut next = || {
        reads += 1;
        records
            .next()
            .map(|row| Box::new(row) as Box<dyn UdfRecord + Send + Sync>)
    };
    let mut emitted = Vec::new();
    let result = rt.aggregate(
        "agg",
        function,
        args,
        &mut next,
        &mut |v| emitted.push(v),
        limits,
    );
    (result.map(|()| emitted), reads)
}

fn run(
    rt: &mut UdfRuntime,
    function: &str,
    args: Vec<Value>,
    input: Vec<Row>,
) -> Result<Vec<Value>, UdfError> {
    run_counting(rt, function, args, input, LIMITS).0
}

#[test]
fn count_reduces_the_records_to_one_value() {
    let mut rt = runtime();
    assert_eq!(
        run(&mut rt, "count", vec![], rows(5)),
        Ok(vec![Value::Int(5)])
    );
}

#[test]
fn arguments_follow_the_stream() {
    let mut rt = runtime();
    let sum = run(&mut rt, "sum", vec![Value::from("n")], rows(10));
    assert_eq!(sum, Ok(vec![Value::Int(55)]));
    let above = run(
        &mut rt,
        "sum_above",
        vec![Value::from("n"), Value::Int(7)],
        rows(10),
    );
    assert_eq!(above, Ok(vec![Value::Int(8 + 9 + 10)]));
}

#[test]
fn an_aggregate_into_a_map_groups_by_a_bin() {
    let mut rt = runtime();
    let counted = run(&mut rt, "by_color", vec![], rows(7)).unwrap();
    // n % 3: 1 green, 2 blue, 0 red; seven records give 3 green, 2 blue, 2 red.
    let [Value::Map(entries)] = counted.as_slice() else {
        panic!("one map expected, got {counted:?}");
    };
    let mut entries = entries.clone();
    entries.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    assert_eq!(
        entries,
        vec![
            (Value::from("blue"), Value::Int(2)),
            (Value::from("green"), Value::Int(3)),
            (Value::from("red"), Value::Int(2)),
        ]
    );
}

#[test]
fn groupby_lists_the_values_of_each_key() {
    let mut rt = runtime();
    let grouped = run(&mut rt, "groups", vec![], rows(7)).unwrap();
    let [Value::Map(entries)] = grouped.as_slice() else {
        panic!("one map expected, got {grouped:?}");
    };
    let mut entries = entries.clone();
    entries.sort_by_key(|(k, _)| match k {
        Value::Int(k) => *k,
        other => panic!("an integer key expected, got {other:?}"),
    });
    let ints = |values: &[i64]| Value::List(values.iter().map(|v| Value::Int(*v)).collect());
    assert_eq!(
        entries,
        vec![
            (Value::Int(0), ints(&[3, 6])),
            (Value::Int(1), ints(&[1, 4, 7])),
            (Value::Int(2), ints(&[2, 5])),
        ]
    );
}

#[test]
fn without_a_reduce_every_value_is_emitted() {
    let mut rt = runtime();
    let values = run(&mut rt, "values", vec![Value::from("n")], rows(3));
    assert_eq!(
        values,
        Ok(vec![Value::Int(1), Value::Int(2), Value::Int(3)])
    );
}

#[test]
fn a_nil_from_map_ends_the_stream_as_in_aerospike() {
    // Bin `missing` is nil for every record: the first nil ends the stream,
    // so nothing is emitted and the input is not read further.
    let mut rt = runtime();
    let (values, reads) = run_counting(
        &mut rt,
        "values",
        vec![Value::from("missing")],
        rows(50),
        LIMITS,
    );
    assert_eq!(values, Ok(vec![]));
    assert_eq!(reads, 1);
}

#[test]
fn operations_after_the_first_reduce_are_left_to_the_client() {
    let mut rt = runtime();
    let scaled = run(&mut rt, "count_then_scale", vec![], rows(4));
    assert_eq!(scaled, Ok(vec![Value::Int(4)]));
}

#[test]
fn an_empty_input_emits_nothing() {
    let mut rt = runtime();
    let (values, reads) = run_counting(&mut rt, "count", vec![], Vec::new(), LIMITS);
    assert_eq!(values, Ok(vec![]));
    assert_eq!(reads, 1);
}

#[test]
fn the_input_is_read_once_to_its_end() {
    let mut rt = runtime();
    let (values, reads) = run_counting(&mut rt, "count", vec![], rows(20), LIMITS);
    assert_eq!(values, Ok(vec![Value::Int(20)]));
    assert_eq!(reads, 21, "each record once, then the end once");
}

#[test]
fn a_numeric_aggregate_is_handed_on_at_1000_as_in_aerospike() {
    let mut rt = runtime();
    let parts = run(&mut rt, "ones", vec![], rows(2500));
    assert_eq!(
        parts,
        Ok(vec![Value::Int(1000), Value::Int(1000), Value::Int(500)])
    );
}

#[test]
fn records_show_their_metadata() {
    let mut rt = runtime();
    let described = run(&mut rt, "metadata", vec![], rows(1)).unwrap();
    let [Value::Map(entries)] = described.as_slice() else {
        panic!("one map expected, got {described:?}");
    };
    let get = |name: &str| {
        entries
            .iter()
            .find(|(k, _)| *k == Value::from(name))
            .map(|(_, v)| v.clone())
    };
    assert_eq!(get("set"), Some(Value::from("people")));
    assert_eq!(get("gen"), Some(Value::Int(3)));
    assert_eq!(get("ttl"), Some(Value::Int(100)));
    assert_eq!(get("d"), Some(Value::Int(1)));
    assert_eq!(get("bins"), Some(Value::Int(2)));
}

#[test]
fn values_lua_cannot_convert_are_not_emitted() {
    let mut rt = runtime();
    assert_eq!(run(&mut rt, "tables", vec![], rows(3)), Ok(vec![]));
}

#[test]
fn a_lua_error_ends_the_run_with_its_message() {
    let mut rt = runtime();
    let error = run(&mut rt, "boom", vec![], rows(3)).unwrap_err();
    let UdfError::Lua { message } = &error else {
        panic!("a Lua error expected, got {error:?}");
    };
    assert!(message.ends_with("agg.lua:51: boom"), "{message}");
    let failure = error.stream_failure_message();
    assert!(
        failure.starts_with("UDF: Execution Error 2 : /opt/aerospike/usr/udf/lua/agg.lua:51:"),
        "{failure}"
    );
    // The state stays usable.
    assert_eq!(
        run(&mut rt, "count", vec![], rows(2)),
        Ok(vec![Value::Int(2)])
    );
}

#[test]
fn a_missing_function_or_module_fails_as_aerospike_words_it() {
    let mut rt = runtime();
    let missing = run(&mut rt, "no_such_function", vec![], rows(1)).unwrap_err();
    assert_eq!(
        missing.stream_failure_message(),
        "UDF: Execution Error 2 : function not found"
    );
    let mut emitted = Vec::new();
    let module = rt
        .aggregate(
            "nowhere",
            "count",
            vec![],
            &mut || None,
            &mut |v| emitted.push(v),
            LIMITS,
        )
        .unwrap_err();
    assert!(
        matches!(module, UdfError::ModuleNotFound { .. }),
        "{module:?}"
    );
    assert_eq!(module.stream_failure_message(), "UDF: Execution Error 1");
    let not_stream = run(&mut rt, "not_a_stream", vec![], rows(1)).unwrap_err();
    assert_eq!(
        not_stream.failure_message(),
        "the stream function did not return its stream"
    );
}

#[test]
fn records_are_read_only() {
    let mut rt = runtime();
    for function in ["writes", "updates"] {
        let error = run(&mut rt, function, vec![], rows(1)).unwrap_err();
        let message = error.failure_message();
        assert!(
            message.contains("records are read-only in a stream UDF"),
            "{function}: {message}"
        );
    }
}

#[test]
fn a_runaway_stream_ends_at_its_deadline() {
    let mut rt = runtime();
    let limits = Limits {
        time_ms: 200,
        memory_bytes: LIMITS.memory_bytes,
    };
    let started = Instant::now();
    let (result, _) = run_counting(&mut rt, "forever", vec![], rows(1), limits);
    let error = result.unwrap_err();
    assert!(matches!(error, UdfError::Timeout { .. }), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(
        error
            .stream_failure_message()
            .ends_with("UDF Execution Timeout"),
        "{error:?}"
    );
}

#[test]
fn a_stream_that_hoards_memory_ends_at_its_cap() {
    let mut rt = runtime();
    let error = run(&mut rt, "hoard", vec![], rows(1)).unwrap_err();
    assert!(matches!(error, UdfError::Memory { .. }), "{error:?}");
    assert!(
        error
            .stream_failure_message()
            .starts_with("UDF: Execution Error 4 : "),
        "{error:?}"
    );
    assert_eq!(
        run(&mut rt, "count", vec![], rows(3)),
        Ok(vec![Value::Int(3)])
    );
}
