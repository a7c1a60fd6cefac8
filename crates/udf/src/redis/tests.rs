//! The Redis scripting environment against a host that answers from a table of replies.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::*;

/// Answers `GET` with a bulk, `ERRORING` with an error, `NULL` with a null, anything else with
/// `+OK`; records what it was called with.
#[derive(Default)]
struct FakeHost {
    calls: Vec<Vec<Vec<u8>>>,
}

impl ScriptHost for FakeHost {
    fn call(&mut self, argv: Vec<Vec<u8>>, _resp: u8) -> RedisValue {
        let name = argv[0].to_ascii_lowercase();
        self.calls.push(argv);
        match name.as_slice() {
            b"get" => RedisValue::Bulk(b"value".to_vec()),
            b"erroring" => RedisValue::Error(b"WRONGTYPE Operation against a key".to_vec()),
            b"null" => RedisValue::NullBulk,
            b"list" => RedisValue::Array(vec![
                RedisValue::Integer(1),
                RedisValue::Bulk(b"a".to_vec()),
            ]),
            _ => RedisValue::Status(b"OK".to_vec()),
        }
    }
}

fn eval(script: &str, keys: &[&[u8]], args: &[&[u8]]) -> (RedisValue, FakeHost) {
    let mut engine = RedisScripting::new().expect("engine");
    let sha = sha1_hex(script.as_bytes());
    let parsed = parse_shebang(script.as_bytes()).expect("shebang");
    let run = ScriptRun {
        sha: &sha,
        body: script.as_bytes(),
        keys,
        args,
        memory_bytes_max: 16 << 20,
    };
    let never: Checkpoint = Arc::new(|| false);
    engine.run(run, parsed.code_offset, FakeHost::default(), &never)
}

/// Runs `script` with its kill switch thrown from another thread after 50 ms.
fn run_killed_after_50_ms(engine: &mut RedisScripting, script: &[u8]) -> RedisValue {
    let sha = sha1_hex(script);
    let run = ScriptRun {
        sha: &sha,
        body: script,
        keys: &[],
        args: &[],
        memory_bytes_max: 0,
    };
    let (checkpoint, killer) = kill_after_50_ms();
    let (reply, _) = engine.run(run, 0, FakeHost::default(), &checkpoint);
    killer.join().expect("killer");
    reply
}

/// A kill switch thrown from another thread after 50 ms: its checkpoint and the thread.
fn kill_after_50_ms() -> (Checkpoint, std::thread::JoinHandle<()>) {
    let killed = Arc::new(AtomicBool::new(false));
    let switch = Arc::clone(&killed);
    let killer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        switch.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let checkpoint: Checkpoint =
        Arc::new(move || killed.load(std::sync::atomic::Ordering::Relaxed));
    (checkpoint, killer)
}

fn error_text(reply: &RedisValue) -> String {
    match reply {
        RedisValue::Error(text) | RedisValue::PassedError(text) => {
            String::from_utf8_lossy(text).into_owned()
        }
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn numbers_truncate_to_integers_and_arrays_stop_at_the_first_nil() {
    let (reply, _) = eval("return {1, 2, 3.7, 'x', false, true, nil, 5}", &[], &[]);
    assert_eq!(
        reply,
        RedisValue::Array(vec![
            RedisValue::Integer(1),
            RedisValue::Integer(2),
            RedisValue::Integer(3),
            RedisValue::Bulk(b"x".to_vec()),
            RedisValue::Null,
            RedisValue::Integer(1),
        ])
    );
}

#[test]
fn keys_and_argv_reach_the_script_and_its_commands() {
    let (reply, host) = eval(
        "return redis.call('SET', KEYS[1], ARGV[1], 10, 2.5)",
        &[b"k"],
        &[b"v"],
    );
    assert_eq!(reply, RedisValue::Status(b"OK".to_vec()));
    let expected: Vec<Vec<u8>> = vec![
        b"SET".to_vec(),
        b"k".to_vec(),
        b"v".to_vec(),
        b"10".to_vec(),
        b"2.5".to_vec(),
    ];
    assert_eq!(host.calls, vec![expected]);
}

#[test]
fn call_raises_a_command_error_with_the_script_position_and_pcall_returns_it() {
    let (reply, _) = eval("return redis.call('erroring')", &[], &[]);
    let sha = sha1_hex(b"return redis.call('erroring')");
    assert_eq!(
        error_text(&reply),
        format!("WRONGTYPE Operation against a key script: {sha}, on @user_script:1.")
    );
    assert!(matches!(reply, RedisValue::PassedError(_)), "{reply:?}");
    let (reply, _) = eval("return redis.pcall('erroring')", &[], &[]);
    assert_eq!(error_text(&reply), "WRONGTYPE Operation against a key");
    // The command's error, passed on: counted where the command answered it.
    assert!(matches!(reply, RedisValue::PassedError(_)), "{reply:?}");
}

#[test]
fn runtime_errors_and_nonexistent_globals_read_as_redis_words_them() {
    let (reply, _) = eval("error('boom')", &[], &[]);
    assert!(error_text(&reply).starts_with("ERR user_script:1: boom script: "));
    // The script's own error: counted as the script answers it.
    assert!(matches!(reply, RedisValue::Error(_)), "{reply:?}");
    let (reply, _) = eval("return y", &[], &[]);
    assert!(
        error_text(&reply).starts_with(
            "ERR user_script:1: Script attempted to access nonexistent global variable 'y'"
        ),
        "{reply:?}"
    );
}

#[test]
fn scripts_cannot_create_globals_nor_change_libraries() {
    for script in [
        "x = 5",
        "string.rep = nil",
        "redis.call = nil",
        "rawset(_G, 'x', 1)",
    ] {
        let (reply, _) = eval(script, &[], &[]);
        assert!(
            error_text(&reply).contains("Attempt to modify a readonly table"),
            "{script}: {reply:?}"
        );
    }
}

#[test]
fn status_error_and_resp3_tables_convert_to_their_replies() {
    let (reply, _) = eval("return redis.error_reply('My Error')", &[], &[]);
    assert_eq!(error_text(&reply), "My Error");
    let (reply, _) = eval("return redis.error_reply('oops')", &[], &[]);
    assert_eq!(error_text(&reply), "ERR oops");
    let (reply, _) = eval("return redis.status_reply('FINE')", &[], &[]);
    assert_eq!(reply, RedisValue::Status(b"FINE".to_vec()));
    let (reply, _) = eval("redis.setresp(3) return {double = 1.5}", &[], &[]);
    assert_eq!(reply, RedisValue::Double(1.5));
    let (reply, _) = eval("redis.setresp(3) return true", &[], &[]);
    assert_eq!(reply, RedisValue::Boolean(true));
    let (reply, _) = eval("return redis.call('null')", &[], &[]);
    assert_eq!(reply, RedisValue::Null);
}

#[test]
fn libraries_answer_as_redis_libraries() {
    let (reply, _) = eval("return cjson.encode({1, 2, {a = '/'}})", &[], &[]);
    assert_eq!(reply, RedisValue::Bulk(br#"[1,2,{"a":"\/"}]"#.to_vec()));
    let (reply, _) = eval(
        "return cjson.decode('[1,{\"b\":[true]}]')[2].b[1]",
        &[],
        &[],
    );
    assert_eq!(reply, RedisValue::Integer(1));
    // encode_keep_buffer answers its setting (true by default) and takes a new one.
    let (reply, _) = eval(
        "local was = cjson.encode_keep_buffer() return {was, cjson.encode_keep_buffer(false), \
         cjson.encode_keep_buffer('on'), cjson.encode({1})}",
        &[],
        &[],
    );
    assert_eq!(
        reply,
        RedisValue::Array(vec![
            RedisValue::Integer(1),
            RedisValue::Null,
            RedisValue::Integer(1),
            RedisValue::Bulk(b"[1]".to_vec()),
        ])
    );
    let (reply, _) = eval("return bit.band(0xff, 0x0f) + bit.lshift(1, 4)", &[], &[]);
    assert_eq!(reply, RedisValue::Integer(31));
    let (reply, _) = eval("return bit.tohex(-1)", &[], &[]);
    assert_eq!(reply, RedisValue::Bulk(b"ffffffff".to_vec()));
    let (reply, _) = eval(
        "return struct.unpack('>I2', struct.pack('>I2', 258))",
        &[],
        &[],
    );
    assert_eq!(reply, RedisValue::Integer(258));
    let (reply, _) = eval("return redis.sha1hex('')", &[], &[]);
    assert_eq!(
        reply,
        RedisValue::Bulk(b"da39a3ee5e6b4b0d3255bfef95601890afd80709".to_vec())
    );
    let (reply, _) = eval("return unpack({7, 8})", &[], &[]);
    assert_eq!(reply, RedisValue::Integer(7));
}

#[test]
fn compile_errors_read_as_redis_words_them() {
    let (reply, _) = eval("return 1 +", &[], &[]);
    assert!(
        error_text(&reply).starts_with("ERR Error compiling script (new function): user_script:1:"),
        "{reply:?}"
    );
}

#[test]
fn shebang_flags_parse_and_unknown_ones_are_refused() {
    let parsed = parse_shebang(b"#!lua flags=no-writes,allow-oom\nreturn 1").expect("flags");
    assert!(parsed.flags.no_writes && parsed.flags.allow_oom && !parsed.flags.compat);
    assert_eq!(parsed.code_offset, 31);
    // `flags=` alone: no flag, not an unknown empty one.
    let empty = parse_shebang(b"#!lua flags=\nreturn 1").expect("no flags");
    assert!(!empty.flags.compat && !empty.flags.no_writes && !empty.flags.allow_oom);
    assert_eq!(
        parse_shebang(b"#!lua flags=bogus\n"),
        Err("Unexpected flag in script shebang: bogus".to_owned())
    );
    assert_eq!(
        parse_shebang(b"#!python\n"),
        Err("Unexpected engine in script shebang: #!python".to_owned())
    );
    assert!(parse_shebang(b"return 1").expect("plain").flags.compat);
}

#[test]
fn a_script_past_its_memory_cap_stops_and_pcall_cannot_swallow_it() {
    let script = "local s = 'x' pcall(function() while true do s = s .. s end end) return 1";
    let (reply, _) = eval(script, &[], &[]);
    assert!(
        error_text(&reply).contains("not enough memory"),
        "{reply:?}"
    );
}

#[test]
fn a_killed_script_stops_even_inside_pcall() {
    let mut engine = RedisScripting::new().expect("engine");
    let script = b"while true do pcall(function() while true do end end) end";
    let reply = run_killed_after_50_ms(&mut engine, script);
    assert!(
        error_text(&reply).starts_with("ERR Script killed by user with SCRIPT KILL..."),
        "{reply:?}"
    );
    // The engine serves the next script.
    let checkpoint: Checkpoint = Arc::new(|| false);
    let body = b"return 2";
    let sha = sha1_hex(body);
    let run = ScriptRun {
        sha: &sha,
        body,
        keys: &[],
        args: &[],
        memory_bytes_max: 0,
    };
    assert_eq!(
        engine.run(run, 0, FakeHost::default(), &checkpoint).0,
        RedisValue::Integer(2)
    );
}

/// Lua's coroutines were left out because a loop inside one ran without the run's hook, out
/// of SCRIPT KILL's reach. The hook is now the state's, installed once, and a coroutine
/// inherits it: a loop inside a coroutine (one inside another too) is killed.
#[test]
fn a_killed_script_stops_even_inside_a_coroutine() {
    let mut engine = RedisScripting::new().expect("engine");
    for script in [
        &b"coroutine.wrap(function() while true do end end)()"[..],
        b"local co = coroutine.create(function() \
              coroutine.wrap(function() while true do end end)() end) \
          return {coroutine.resume(co)}",
    ] {
        let reply = run_killed_after_50_ms(&mut engine, script);
        assert!(
            error_text(&reply).contains("Script killed by user with SCRIPT KILL..."),
            "{reply:?}"
        );
    }
}
