//! `ctxwindow-fuzz TARGET SECONDS` (or `TARGET FILE` to replay one input): mutation fuzzing without coverage feedback, on stable Rust.
//!
//! Inputs start from seeds (the files of `fuzz/seeds/TARGET/`, plus built-in ones) and are
//! mutated (bit flips, byte edits, insertions of interesting fragments, repeats of a range,
//! splices with other seeds); a mutant is kept in the corpus now and then so inputs drift far from
//! the seeds. Each target checks properties, not only the absence of panics; a panic or a failed
//! property is a crash, saved to `fuzz/crashes/TARGET-N.bin`. Built with overflow checks and
//! debug assertions on, so an arithmetic overflow is a crash too. Prints executions and crashes.

use std::ffi::CString;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine as _;
use ctxwindow::*;
use ctxwindow_core::chat::{ChatMessage, Part, ToolCall, message_tokens_with};
use ctxwindow_core::image::{
    ImageDetail, ImagePricing, MAX_PATCHES, data_url_image_size, high_detail_tiles, image_patches,
    image_size,
};
use ctxwindow_core::tokenize::HeuristicCounter;
use ctxwindow_core::{Encoding, Tokenizer};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Fragments worth inserting: multi-byte characters, contractions, white space the split
/// pattern treats specially, digits, image magic numbers and markers.
const FRAGMENTS: &[&[u8]] = &[
    "é".as_bytes(),
    "中".as_bytes(),
    "👍🏽".as_bytes(),
    "\u{300}".as_bytes(),
    "\u{a0}".as_bytes(),
    "\u{3000}".as_bytes(),
    "\u{85}".as_bytes(),
    "\u{200d}".as_bytes(),
    b"'s",
    b"'LL",
    b" ",
    b"  ",
    b"\n",
    b"\r\n",
    b"\t",
    b"123",
    b"4567",
    b"aaaaaaaa",
    b"========",
    b"the",
    b" The",
    b"{\"",
    b"\":",
    b"//",
    b"\xff",
    b"\xc3",
    b"\x89PNG\r\n\x1a\n",
    b"GIF89a",
    b"\xff\xd8",
    b"\xff\xc0",
    b"\xff\xc2",
    b"\xff\xd9",
    b"RIFF",
    b"WEBP",
    b"VP8 ",
    b"VP8L",
    b"VP8X",
    b"IHDR",
    b"\x00\x00\x00\x00",
    b"\xff\xff\xff\xff",
    b"\x7f\xff\xff\xff",
];

fn mutate(rng: &mut Rng, data: &mut Vec<u8>, corpus: &[Vec<u8>], max_len: usize) {
    for _ in 0..1 + rng.below(4) {
        let len = data.len();
        match rng.below(9) {
            0 if len > 0 => {
                let at = rng.below(len);
                data[at] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let at = rng.below(len);
                data[at] = rng.next() as u8;
            }
            2 => {
                let at = rng.below(len + 1);
                let fragment = FRAGMENTS[rng.below(FRAGMENTS.len())];
                data.splice(at..at, fragment.iter().copied());
            }
            3 if len > 0 => {
                let start = rng.below(len);
                let end = (start + 1 + rng.below(16)).min(len);
                data.drain(start..end);
            }
            4 if len > 0 => {
                // Repeat a range: long runs make long pieces.
                let start = rng.below(len);
                let end = (start + 1 + rng.below(8)).min(len);
                let chunk = data[start..end].to_vec();
                for _ in 0..1 + rng.below(200) {
                    data.splice(end..end, chunk.iter().copied());
                }
            }
            5 => {
                let other = &corpus[rng.below(corpus.len())];
                if !other.is_empty() {
                    let start = rng.below(other.len());
                    let end = (start + 1 + rng.below(64)).min(other.len());
                    let at = rng.below(len + 1);
                    data.splice(at..at, other[start..end].iter().copied());
                }
            }
            6 => data.push(rng.next() as u8),
            7 if len > 0 => data.truncate(rng.below(len)),
            _ => {
                let at = rng.below(len + 1);
                let value = (rng.next() as u32).to_be_bytes();
                data.splice(at..at, value);
            }
        }
    }
    data.truncate(max_len);
}

/// Exact counting: `count` equals the length of `tiktoken-rs`'s `encode_ordinary` (the reference
/// implementation of Python tiktoken's core) for every encoding; the pieces rebuild the text.
fn target_count(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    for encoding in Encoding::ALL {
        let tokenizer = Tokenizer::from_encoding(encoding);
        let count = tokenizer.count(&text);
        let expected = tokenizer.encode(&text).len();
        assert_eq!(count, expected, "{} on {text:?}", encoding.name());
        assert_eq!(tokenizer.pieces(&text).concat(), text);
        let many = tokenizer
            .count_many(&[text.as_ref(), "x"])
            .expect("small counts");
        assert_eq!(many[0] as usize, count);
    }
}

/// The image-header parser: no panic on any bytes; a base64 `data:` URL reads the same size;
/// every model family bills between its floor and its cap.
fn target_image(data: &[u8]) {
    let size = image_size(data);
    let url = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(data)
    );
    assert_eq!(data_url_image_size(&url), size);
    let raw = |at: usize| {
        let mut word = [0u8; 4];
        for (i, b) in data.iter().skip(at).take(4).enumerate() {
            word[i] = *b;
        }
        u32::from_le_bytes(word)
    };
    let sizes = [
        size,
        Some((raw(0), raw(4))),
        Some((raw(0) % 10_000 + 1, raw(4) % 10_000 + 1)),
    ];
    for size in sizes.into_iter().flatten() {
        let (w, h) = size;
        let tiles = high_detail_tiles(w, h);
        assert!(
            tiles <= 8 && (tiles >= 1 || w == 0 || h == 0),
            "{w} x {h}: {tiles} tiles"
        );
        if w > 0 && h > 0 {
            let patches = image_patches(w, h);
            assert!(
                (1..=MAX_PATCHES).contains(&patches),
                "{w} x {h}: {patches} patches"
            );
        }
        for model in [
            "gpt-4o",
            "gpt-4o-mini",
            "gpt-4.1-mini",
            "o4-mini",
            "o3",
            "gpt-5",
            "x",
        ] {
            let pricing = ImagePricing::for_model(model);
            for detail in [ImageDetail::Low, ImageDetail::High, ImageDetail::Auto] {
                let tokens = pricing.tokens(detail, Some(size));
                assert!(
                    tokens <= pricing.tokens(ImageDetail::High, None),
                    "{model} {w} x {h}"
                );
            }
        }
    }
}

/// Chat accounting: a message built from the bytes costs exactly the convention, recomputed
/// from the text counts, with every counter and pricing.
fn target_chat(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let fields: Vec<&str> = text.split('|').collect();
    let field = |i: usize| fields.get(i).copied().unwrap_or("");
    let number = |i: usize| {
        field(i).bytes().fold(0u32, |acc, b| {
            acc.wrapping_mul(31).wrapping_add(u32::from(b))
        })
    };
    let detail = [ImageDetail::Low, ImageDetail::High, ImageDetail::Auto][number(5) as usize % 3];
    let size = (number(6) % 3 != 0).then(|| (number(6) % 20_000, number(7) % 20_000));
    let mut parts = vec![Part::Text(field(1))];
    if !field(5).is_empty() {
        parts.push(Part::Image { detail, size });
    }
    parts.push(Part::Text(field(8)));
    let calls: Vec<ToolCall<'_>> = fields
        .iter()
        .skip(9)
        .collect::<Vec<_>>()
        .chunks(2)
        .map(|pair| ToolCall {
            name: pair[0],
            arguments: pair.get(1).map_or("", |a| **a),
        })
        .collect();
    let message = ChatMessage {
        role: field(0),
        parts: parts.clone(),
        name: (!field(2).is_empty()).then(|| field(2)),
        tool_call_id: (!field(3).is_empty()).then(|| field(3)),
        tool_calls: calls.clone(),
    };
    for model in ["gpt-4o", "gpt-4o-mini", "gpt-4.1-mini", "gpt-4"] {
        let tokenizer = Tokenizer::for_model(model).expect("known model");
        let images = ImagePricing::for_model(model);
        let count = |s: &str| tokenizer.count(s) as u64;
        let mut expected = 3 + count(message.role);
        for part in &parts {
            expected += match *part {
                Part::Text(t) => count(t),
                Part::Image { detail, size } => images.tokens(detail, size),
            };
        }
        expected += message.name.map_or(0, |n| 1 + count(n));
        expected += message.tool_call_id.map_or(0, count);
        expected += calls
            .iter()
            .map(|c| 3 + count(c.name) + count(c.arguments))
            .sum::<u64>();
        assert_eq!(tokenizer.count_message(&message), expected, "{model}");
        assert_eq!(
            tokenizer.count_messages(std::slice::from_ref(&message)),
            expected + 3
        );
    }
    let heuristic = HeuristicCounter::new(f64::from(number(4) % 10 + 1) / 2.0).expect("> 0");
    let estimate = message_tokens_with(&message, ImagePricing::DEFAULT, |s| {
        Ok::<u64, ()>(heuristic.count(s))
    })
    .expect("infallible counter");
    assert!(estimate >= 3);
}

fn known(status: ctxw_status) -> ctxw_status {
    assert!(
        status != ctxw_status::CTXW_PANIC,
        "a panic crossed the C boundary"
    );
    status
}

/// The C entry points: a program of calls read from the bytes, with lengths that overflow,
/// NULL pointers, invalid UTF-8 and snapshots of other histories. No call may panic (the
/// boundary reports `CTXW_PANIC`, a crash here) and the history stays consistent.
fn target_ffi(data: &[u8]) {
    let mut rng = Rng(data.iter().fold(0x9E37_79B9_7F4A_7C15, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
    }) | 1);
    let mut histories = [std::ptr::null_mut(); 2];
    for h in &mut histories {
        // SAFETY: `h` is a valid out-pointer.
        assert_eq!(known(unsafe { ctxw_history_new(h) }), ctxw_status::CTXW_OK);
    }
    let mut snapshots: Vec<*mut ctxw_snapshot> = Vec::new();
    let mut tokenizer = std::ptr::null_mut();
    let name = CString::new(["cl100k_base", "o200k_base", "gpt-4o", "p50k_base"][data.len() % 4])
        .expect("no NUL");
    // SAFETY: NUL-terminated name, valid out-pointer.
    let status = unsafe {
        if data.len() % 4 == 2 {
            ctxw_tokenizer_for_model(name.as_ptr(), &mut tokenizer)
        } else {
            ctxw_tokenizer_new(name.as_ptr(), &mut tokenizer)
        }
    };
    assert_eq!(known(status), ctxw_status::CTXW_OK);
    let mut out = vec![0u64; 64];
    for (step, chunk) in data.chunks(6).enumerate() {
        let h = histories[step % 2];
        let arg = |i: usize| u64::from(*chunk.get(i).unwrap_or(&0));
        let big = |i: usize| {
            if arg(i) > 250 {
                u64::MAX - arg(i)
            } else {
                arg(i) * 37
            }
        };
        // SAFETY (all calls below): every pointer is NULL or valid for the length passed with
        // it; handles come from the matching `_new` and are freed once, at the end.
        unsafe {
            match chunk[0] % 12 {
                0 | 1 => {
                    known(ctxw_history_push(
                        h,
                        arg(1),
                        big(2),
                        chunk.get(3).copied().unwrap_or(1),
                    ));
                }
                2 => {
                    let low = big(3);
                    let low_ptr = if arg(4) % 2 == 0 {
                        std::ptr::null()
                    } else {
                        &low
                    };
                    let cap = (arg(5) as usize).min(out.len());
                    let mut len = 0usize;
                    known(ctxw_history_evict(
                        h,
                        big(1),
                        big(2),
                        low_ptr,
                        out.as_mut_ptr(),
                        cap,
                        &mut len,
                    ));
                    // NULL output with a zero capacity: only the count is reported.
                    known(ctxw_history_evict(
                        h,
                        big(1),
                        0,
                        std::ptr::null(),
                        std::ptr::null_mut(),
                        0,
                        &mut len,
                    ));
                }
                3 => {
                    let mut snapshot = std::ptr::null_mut();
                    if known(ctxw_history_snapshot(h, &mut snapshot)) == ctxw_status::CTXW_OK {
                        snapshots.push(snapshot);
                    }
                }
                4 if !snapshots.is_empty() => {
                    let snapshot = snapshots[rng.below(snapshots.len())];
                    known(ctxw_history_rollback(h, snapshot));
                }
                5 => {
                    known(ctxw_history_clear(h));
                }
                6 => {
                    let (mut payload, mut tokens, mut group) = (0u64, 0u64, false);
                    known(ctxw_history_get(
                        h,
                        big(1) as usize,
                        &mut payload,
                        &mut tokens,
                        &mut group,
                    ));
                    known(ctxw_history_get(
                        h,
                        0,
                        std::ptr::null_mut(),
                        &mut tokens,
                        &mut group,
                    ));
                }
                7 => {
                    let bytes = &data[step * 6..];
                    let mut count = 0u64;
                    known(ctxw_tokenizer_count(
                        tokenizer,
                        bytes.as_ptr().cast(),
                        bytes.len(),
                        &mut count,
                    ));
                    // A NULL text with any length fails without reading.
                    known(ctxw_tokenizer_count(
                        tokenizer,
                        std::ptr::null(),
                        big(1) as usize,
                        &mut count,
                    ));
                }
                8 => {
                    let texts = [data.as_ptr().cast(), chunk.as_ptr().cast()];
                    let lens = [data.len(), chunk.len()];
                    let mut counts = [0u32; 2];
                    known(ctxw_tokenizer_count_many(
                        tokenizer,
                        texts.as_ptr(),
                        lens.as_ptr(),
                        2,
                        counts.as_mut_ptr(),
                    ));
                    known(ctxw_tokenizer_count_many(
                        tokenizer,
                        texts.as_ptr(),
                        lens.as_ptr(),
                        usize::MAX / 2 + big(1) as usize % 7,
                        std::ptr::null_mut(),
                    ));
                }
                9 => {
                    let n = 1 + arg(1) as usize % 16;
                    let scores: Vec<f64> =
                        (0..n).map(|i| (i as f64 * arg(2) as f64).sin()).collect();
                    let tokens: Vec<i64> = (0..n).map(|i| (i as i64 * arg(3) as i64) - 3).collect();
                    let pinned: Vec<u8> =
                        (0..n).map(|i| (i as u8).wrapping_mul(chunk[0])).collect();
                    let kinds: Vec<u8> = (0..n)
                        .map(|i| (i as u8).wrapping_add(chunk[0]) % 7)
                        .collect();
                    let mut indices = vec![0usize; n];
                    let mut len = 0usize;
                    known(ctxw_select_by_tokens(
                        scores.as_ptr(),
                        tokens.as_ptr(),
                        n,
                        pinned.as_ptr(),
                        kinds.as_ptr(),
                        big(4),
                        arg(5) as usize,
                        indices.as_mut_ptr(),
                        n,
                        &mut len,
                    ));
                    known(ctxw_select_by_ratio(
                        scores.as_ptr(),
                        n,
                        pinned.as_ptr(),
                        kinds.as_ptr(),
                        arg(4) as f64 / 100.0,
                        arg(5) as usize,
                        indices.as_mut_ptr(),
                        n,
                        &mut len,
                    ));
                    // An element count whose byte size overflows, with NULL arrays.
                    known(ctxw_select_by_ratio(
                        std::ptr::null(),
                        usize::MAX / 4,
                        std::ptr::null(),
                        std::ptr::null(),
                        0.5,
                        0,
                        std::ptr::null_mut(),
                        0,
                        &mut len,
                    ));
                }
                10 => {
                    let n = arg(1) as usize % 12;
                    let ints: Vec<i64> = (0..n).map(|i| i as i64 * (arg(2) as i64 - 100)).collect();
                    let kinds: Vec<u8> = (0..n)
                        .map(|i| (i as u8).wrapping_add(chunk[0]) % 8)
                        .collect();
                    let embedding: Vec<f32> = (0..n * 4).map(|i| (i as f32).cos()).collect();
                    let columns = ctxw_columns {
                        len: if arg(3) > 240 { usize::MAX / 2 } else { n },
                        tokens: ints.as_ptr(),
                        created_turn: ints.as_ptr(),
                        last_access_turn: ints.as_ptr(),
                        access_count: ints.as_ptr(),
                        content_type: kinds.as_ptr(),
                        priority: std::ptr::null(),
                        pinned: std::ptr::null(),
                        reference_count: ints.as_ptr(),
                        embedding: embedding.as_ptr(),
                        task_embedding: embedding.as_ptr(),
                        embedding_dim: if arg(4) > 240 {
                            usize::MAX / 3
                        } else {
                            4.min(n * 4)
                        },
                    };
                    let policy = CString::new(
                        [
                            "retention",
                            "fifo",
                            "lru",
                            "priority",
                            "type_ttl",
                            "hybrid",
                            "nope",
                        ][arg(5) as usize % 7],
                    )
                    .expect("no NUL");
                    let mut scores = vec![0f64; n];
                    if columns.len == n && (columns.embedding_dim == 4 || n == 0) {
                        known(ctxw_score(
                            policy.as_ptr(),
                            arg(2) as i64,
                            &columns,
                            scores.as_mut_ptr(),
                            n,
                        ));
                    } else {
                        // Overflowing lengths with NULL arrays must fail without reading.
                        let empty = ctxw_columns {
                            tokens: std::ptr::null(),
                            created_turn: std::ptr::null(),
                            last_access_turn: std::ptr::null(),
                            access_count: std::ptr::null(),
                            content_type: std::ptr::null(),
                            reference_count: std::ptr::null(),
                            embedding: std::ptr::null(),
                            task_embedding: std::ptr::null(),
                            ..columns
                        };
                        known(ctxw_score(
                            policy.as_ptr(),
                            0,
                            &empty,
                            std::ptr::null_mut(),
                            0,
                        ));
                    }
                }
                _ => {
                    let message = ctxw_status_message(rng.next() as u32);
                    assert!(!message.is_null());
                    let mut buf = [0i8; 8];
                    let mut len = 0usize;
                    known(ctxw_last_error_message(
                        buf.as_mut_ptr(),
                        arg(1) as usize % 9,
                        &mut len,
                    ));
                }
            }
            // The total is the sum of the entries.
            let (mut len, mut total) = (0usize, 0u64);
            assert_eq!(known(ctxw_history_len(h, &mut len)), ctxw_status::CTXW_OK);
            assert_eq!(
                known(ctxw_history_total_tokens(h, &mut total)),
                ctxw_status::CTXW_OK
            );
            let mut sum = 0u64;
            for i in 0..len {
                let (mut payload, mut tokens, mut group) = (0u64, 0u64, false);
                assert_eq!(
                    known(ctxw_history_get(
                        h,
                        i,
                        &mut payload,
                        &mut tokens,
                        &mut group
                    )),
                    ctxw_status::CTXW_OK
                );
                sum = sum.checked_add(tokens).expect("the total fits");
            }
            assert_eq!(sum, total);
        }
    }
    // SAFETY: each handle is freed once.
    unsafe {
        for snapshot in snapshots {
            ctxw_snapshot_free(snapshot);
        }
        for h in histories {
            ctxw_history_free(h);
        }
        ctxw_tokenizer_free(tokenizer);
    }
}

fn builtin_seeds(target: &str) -> Vec<Vec<u8>> {
    let texts: &[&str] = &[
        "hello world",
        "I'm here, you're there",
        "  leading  and trailing  ",
        "a\n\n\n  b",
        "{\"reservation_id\": \"ABC123\", \"flights\": []}",
        "naïve café 中文字符 👍🏽🎉",
        "fn main() {\n    println!(\"{}\", x);\n}\n",
        "=====\n-----",
        "12345678901234567890",
    ];
    let mut seeds: Vec<Vec<u8>> = texts.iter().map(|t| t.as_bytes().to_vec()).collect();
    if target == "image" {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend_from_slice(&640u32.to_be_bytes());
        png.extend_from_slice(&480u32.to_be_bytes());
        seeds.push(png);
        seeds.push(b"GIF89a\x20\x03\x58\x02".to_vec());
        seeds.push(vec![
            0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 0, 0, 0xFF, 0xC0, 0, 0x11, 8, 1, 0x2C, 1, 0x90,
        ]);
        let mut webp = b"RIFF\0\0\0\0WEBPVP8X".to_vec();
        webp.extend_from_slice(&[0; 8]);
        webp.extend_from_slice(&[0xff, 0x03, 0x00, 0x57, 0x02, 0x00]);
        seeds.push(webp);
    }
    if target == "chat" {
        seeds.push(
            b"user|hello|bob|call_1|3|x|1024|768|more text|get_weather|{\"city\": \"Paris\"}"
                .to_vec(),
        );
        seeds.push(b"assistant||||||||tool|{}|other|[1,2]".to_vec());
    }
    seeds
}

fn main() {
    let mut args = std::env::args().skip(1);
    let target = args
        .next()
        .expect("usage: ctxwindow-fuzz count|image|chat|ffi SECONDS");
    let arg = args.next().unwrap_or_else(|| "10".to_owned());
    let (run, max_len): (fn(&[u8]), usize) = match target.as_str() {
        "count" => (target_count, 4096),
        "image" => (target_image, 256),
        "chat" => (target_chat, 1024),
        "ffi" => (target_ffi, 512),
        other => panic!("unknown target {other}"),
    };
    if Path::new(&arg).is_file() {
        // `ctxwindow-fuzz TARGET FILE`: run one input, panic message shown.
        run(&std::fs::read(&arg).expect("a readable input"));
        println!("{arg}: no crash");
        return;
    }
    let seconds: u64 = arg.parse().expect("seconds, or an input file to replay");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut corpus = builtin_seeds(&target);
    if let Ok(dir) = std::fs::read_dir(root.join("seeds").join(&target)) {
        for entry in dir.flatten() {
            corpus.push(std::fs::read(entry.path()).expect("a readable seed"));
        }
    }
    let seed_count = corpus.len();
    // Replay the seeds first (they include every crash found so far).
    std::panic::set_hook(Box::new(|_| {}));
    let mut crashes = 0usize;
    let mut rng = Rng(0x2545_F491_4F6C_DD1D ^ seconds);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut executions = 0u64;
    let mut input = Vec::new();
    while Instant::now() < deadline || executions < seed_count as u64 {
        if executions < seed_count as u64 {
            input.clone_from(&corpus[executions as usize]);
        } else {
            input.clone_from(&corpus[rng.below(corpus.len())]);
            mutate(&mut rng, &mut input, &corpus, max_len);
        }
        executions += 1;
        if catch_unwind(AssertUnwindSafe(|| run(&input))).is_err() {
            crashes += 1;
            let dir = root.join("crashes");
            std::fs::create_dir_all(&dir).expect("crash directory");
            let path = dir.join(format!("{target}-{crashes}.bin"));
            std::fs::write(&path, &input).expect("crash file");
            eprintln!("crash: {}", path.display());
        } else if rng.below(32) == 0 && corpus.len() < 4096 {
            corpus.push(input.clone());
        }
    }
    println!("{target}: {executions} executions in {seconds} s, {crashes} crashes");
    if crashes > 0 {
        std::process::exit(1);
    }
}
