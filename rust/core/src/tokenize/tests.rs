//! Differential tests of the counting algorithms against `tiktoken-rs` and against each other.

use super::backtrack::PairCache;
use super::merge::{SMALL_PIECE, merge_count_large, merge_count_small};
use super::runs::{MAX_AFFIX, affixed_run};
use super::*;

const SAMPLES: &[&str] = &[
    "",
    "hello world",
    "Hello, World!  How are   you?\n\n\tFine.\r\n",
    "   leading and trailing   ",
    "I'm here, you're there; they'll've THE'S 'S",
    "numbers 1234567 and 3.14159, 2026-11-21",
    "unicode: naïve café, Ελληνικά, русский, 中文字符, 日本語のテキスト, 한국어",
    "emoji 👍🏽🎉 family 👨‍👩‍👧 flags 🇫🇷",
    "code:\n    fn main() {\n        println!(\"{}\", x);\n    }\n",
    "{\"reservation_id\": \"ABC123\", \"flights\": [{\"origin\": \"JFK\"}]}",
    " \u{a0}\u{2003}x \u{3000}y\u{85}z",
    "path/to/file.py:42: error: something/went\\wrong//",
    "a\n\n\n  b  \n  \n c",
    "ſ's K's 'S 'LL 'Ve",
    "\u{300}\u{301}abc\u{300} ABCdef DEFghi ÀÉÎõü",
];

#[test]
fn counts_equal_tiktoken_rs_on_samples() {
    for encoding in Encoding::ALL {
        let tokenizer = Tokenizer::from_encoding(encoding);
        for sample in SAMPLES {
            assert_eq!(
                tokenizer.count(sample),
                tokenizer.encode(sample).len(),
                "{} on {sample:?}",
                encoding.name()
            );
        }
    }
}

#[test]
fn long_runs_count_like_tiktoken_rs() {
    let tokenizer = Tokenizer::new("cl100k_base").unwrap();
    for text in [
        "a".repeat(10_000),
        " ".repeat(5_000) + "x",
        "ab".repeat(3_000),
    ] {
        assert_eq!(tokenizer.count(&text), tokenizer.encode(&text).len());
    }
}

#[test]
fn small_and_large_merges_agree() {
    let vocab = Encoding::Cl100kBase.vocab();
    for text in [
        "abcdefghij",
        "aaaaaaaaaaaaaaaaaaaaaaaaa",
        "xyzzyxyzzy qwerty",
        "😀😀😀é",
    ] {
        let bytes = text.as_bytes();
        assert_eq!(
            merge_count_small(&vocab.ranks, bytes),
            merge_count_large(&vocab.ranks, bytes),
            "{text}"
        );
    }
}

/// A small deterministic generator for the differential tests (no test dependency).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

#[test]
fn every_token_merges_to_itself() {
    // The condition under which the backtracking counter equals the byte-pair merges.
    for encoding in Encoding::ALL {
        let vocab = encoding.vocab();
        for token in vocab.ranks.keys() {
            let count = if token.len() < SMALL_PIECE {
                merge_count_small(&vocab.ranks, token)
            } else {
                merge_count_large(&vocab.ranks, token)
            };
            assert_eq!(count, 1, "{} token {token:?}", encoding.name());
        }
    }
}

#[test]
fn backtracking_counts_equal_the_merges() {
    let alphabets: &[&[&str]] = &[
        &["a"],
        &["a", "b"],
        &["a", "aa", "b", "ab"],
        &["e", "r", "t", "s", "in", "er", "th"],
        &["0", "1", "=", "-", "_", "*", "/", "\\"],
        &["é", "ü", "a", "e", "\u{301}"],
        &["中", "文", "字", "符", "日", "本"],
        &["👍", "🏽", "\u{200d}", "🎉"],
        &[" ", "\n", "\t", "\u{a0}", "\u{3000}"],
        &["http", "://", "www", ".", "com", "/", "?", "=", "&"],
    ];
    let mut rng = Lcg(7);
    for encoding in Encoding::ALL {
        let vocab = encoding.vocab();
        let backtrack = vocab.backtrack();
        // Pieces the encoder finished within its budget (the rest fall back to the heap).
        let mut finished = 0;
        for round in 0..400 {
            let alphabet = alphabets[round % alphabets.len()];
            let parts = 1 + rng.below(if round % 7 == 0 { 3000 } else { 300 });
            let mut piece = String::new();
            for _ in 0..parts {
                piece.push_str(alphabet[rng.below(alphabet.len())]);
            }
            let got = backtrack.count(piece.as_bytes(), &mut PairCache::new());
            let expected = merge_count_large(&vocab.ranks, piece.as_bytes());
            assert!(
                got.is_none_or(|n| n == expected),
                "{} on {piece:?}: {got:?} != {expected}",
                encoding.name()
            );
            finished += usize::from(got.is_some());
        }
        // Arbitrary bytes, including ones that are not UTF-8.
        for _ in 0..200 {
            let len = 1 + rng.below(600);
            let bytes: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
            let got = backtrack.count(&bytes, &mut PairCache::new());
            let expected = merge_count_large(&vocab.ranks, &bytes);
            assert!(
                got.is_none_or(|n| n == expected),
                "{} on {bytes:?}: {got:?} != {expected}",
                encoding.name()
            );
            finished += usize::from(got.is_some());
        }
        assert!(finished > 500, "{}: {finished} of 600", encoding.name());
    }
}

#[test]
fn adversarial_runs_count_like_tiktoken_rs() {
    for encoding in Encoding::ALL {
        let t = Tokenizer::from_encoding(encoding);
        for text in [
            "a".repeat(100_000),
            "ab".repeat(30_000),
            "=".repeat(50_000),
            "0".repeat(20_000),
            "é".repeat(20_000),
            "👍".repeat(5_000),
            "xyz".repeat(20_000),
        ] {
            assert_eq!(
                t.count(&text),
                t.encode(&text).len(),
                "{} on {:?}...",
                encoding.name(),
                &text[..8]
            );
        }
    }
}

/// ASCII punctuation, the characters `[^\s\p{L}\p{N}]+` pieces are made of.
const PUNCTUATION: &str = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

#[test]
fn runs_of_one_byte_count_like_tiktoken_rs() {
    // Every ASCII byte's run table against the byte-pair merges: `tiktoken-rs` itself up to
    // 300 bytes and at a few long lengths, the heap merge (equal to it) at every 37th length
    // up to 5000.
    for encoding in Encoding::ALL {
        let vocab = encoding.vocab();
        for byte in 1..128u8 {
            let Some(run) = vocab.run_counts(byte) else {
                continue;
            };
            assert_eq!(run.count(1), 1);
            for n in (2..=300).chain([4096, 4999, 5000]) {
                let piece = vec![byte; n];
                let expected = tiktoken_rs::byte_pair_split(&piece, &vocab.ranks).len();
                assert_eq!(run.count(n), expected, "{} {byte} * {n}", encoding.name());
            }
            for n in (301..5000).step_by(37).chain([100_000]) {
                let piece = vec![byte; n];
                let expected = merge_count_large(&vocab.ranks, &piece);
                assert_eq!(run.count(n), expected, "{} {byte} * {n}", encoding.name());
            }
        }
    }
}

#[test]
fn every_punctuation_run_has_a_table() {
    for encoding in Encoding::ALL {
        for byte in PUNCTUATION.bytes().chain(*b" \n\tax") {
            assert!(
                encoding.vocab().run_counts(byte).is_some(),
                "{} {:?}",
                encoding.name(),
                byte as char
            );
        }
    }
}

#[test]
fn affixed_runs_count_like_the_merges() {
    // Runs with up to 16 bytes before and after (any bytes, runs of them included), short
    // enough to be computed position by position and long enough to use the table's period.
    let mut rng = Lcg(1818);
    let alphabet: Vec<u8> = PUNCTUATION.bytes().chain(*b" \n\t/xa\xc3\xa9").collect();
    for encoding in Encoding::ALL {
        let vocab = encoding.vocab();
        let backtrack = vocab.backtrack();
        let mut checked = 0;
        for round in 0..300 {
            let byte = alphabet[rng.below(alphabet.len())];
            let affix = |rng: &mut Lcg| -> Vec<u8> {
                let len = rng.below(MAX_AFFIX + 1);
                let other = alphabet[rng.below(alphabet.len())];
                (0..len)
                    .map(|_| {
                        if rng.below(3) == 0 {
                            other
                        } else {
                            alphabet[rng.below(alphabet.len())]
                        }
                    })
                    .collect()
            };
            let head = affix(&mut rng);
            let tail = affix(&mut rng);
            let m = backtrack.max_len + rng.below(if round % 3 == 0 { 4000 } else { 400 });
            let piece = [head, vec![byte; m], tail].concat();
            let Some(run) = affixed_run(&piece, backtrack.max_len) else {
                continue;
            };
            let Some(table) = vocab.run_counts(piece[run.start]) else {
                continue;
            };
            let got = table.count_affixed(&vocab.ranks, backtrack, &piece, run);
            let expected = merge_count_large(&vocab.ranks, &piece);
            assert_eq!(got, Some(expected), "{} on {piece:?}", encoding.name());
            checked += 1;
        }
        assert!(checked > 200, "{}: {checked}", encoding.name());
    }
}

#[test]
fn pieces_with_several_runs_count_like_the_merges() {
    // Runs of random lengths (long ones among them) between random bytes.
    let mut rng = Lcg(18_18);
    let alphabet: Vec<u8> = PUNCTUATION.bytes().chain(*b" \n\t/xa\xc3\xa9").collect();
    for encoding in Encoding::ALL {
        let vocab = encoding.vocab();
        let mut checked = 0;
        for _ in 0..120 {
            let mut piece = Vec::new();
            for _ in 0..1 + rng.below(5) {
                let byte = alphabet[rng.below(alphabet.len())];
                let len = [
                    1 + rng.below(40),
                    30 + rng.below(170),
                    200 + rng.below(400),
                    400 + rng.below(1500),
                ][rng.below(4)];
                piece.extend(std::iter::repeat_n(byte, len));
                for _ in 0..rng.below(6) {
                    piece.push(alphabet[rng.below(alphabet.len())]);
                }
            }
            let Some(got) = vocab.count_with_runs(&piece) else {
                continue;
            };
            let expected = merge_count_large(&vocab.ranks, &piece);
            assert_eq!(got, expected, "{} on {piece:?}", encoding.name());
            checked += 1;
        }
        assert!(checked > 50, "{}: {checked}", encoding.name());
    }
}

#[test]
fn punctuation_runs_in_text_count_like_tiktoken_rs() {
    // Whole texts through the split pattern: runs alone, after a space or a letter, before
    // newlines and slashes, and two runs in one piece.
    let mut rng = Lcg(18);
    for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
        let t = Tokenizer::from_encoding(encoding);
        for c in PUNCTUATION.chars() {
            let d = PUNCTUATION
                .chars()
                .nth(rng.below(PUNCTUATION.len()))
                .unwrap();
            let n = 1 + rng.below(3000);
            let run = c.to_string().repeat(n);
            for text in [
                run.clone(),
                format!(" {run}"),
                format!("x{run}"),
                format!("{run}\n\n"),
                format!("{run}//"),
                format!("{run}{}", d.to_string().repeat(1 + rng.below(500))),
                format!("{}{run}", d.to_string().repeat(1 + rng.below(500))),
                format!("a {run} b {run}"),
            ] {
                assert_eq!(
                    t.count(&text),
                    t.encode(&text).len(),
                    "{} on {c:?} * {n} in {:?}...",
                    encoding.name(),
                    &text[..text.len().min(12)]
                );
            }
        }
    }
}

#[test]
fn known_counts() {
    let cl100k = Tokenizer::new("cl100k_base").unwrap();
    assert_eq!(cl100k.count("hello world"), 2);
    assert_eq!(cl100k.encode("hello world"), vec![15339, 1917]);
    assert_eq!(cl100k.decode(&[15339, 1917]).unwrap(), "hello world");
    assert_eq!(cl100k.vocab_size(), 100_256);
    let o200k = Tokenizer::for_model("gpt-4o-2024-08-06").unwrap();
    assert_eq!(o200k.name(), "o200k_base");
    for prefixed in [
        "openai:gpt-4o",
        "openai/o3",
        "ft:gpt-4o-mini-2024-07-18:org::x1",
    ] {
        assert_eq!(Encoding::for_model(prefixed).unwrap(), Encoding::O200kBase);
    }
    assert!(Encoding::for_model("openai:claude-3").is_err());
    assert_eq!(o200k.vocab_size(), 199_998);
}

#[test]
fn unknown_names_list_the_known_ones() {
    let err = Tokenizer::new("cl100k").unwrap_err();
    assert!(err.to_string().contains("o200k_base"), "{err}");
    let err = Tokenizer::for_model("llama-3").unwrap_err();
    assert!(err.to_string().contains("gpt-4o"), "{err}");
}

#[test]
fn decode_errors() {
    let t = Tokenizer::new("cl100k_base").unwrap();
    assert!(matches!(
        t.decode(&[4_000_000]),
        Err(Error::UnknownToken { .. })
    ));
    // 'é' is two bytes; its first-byte token alone is not valid UTF-8.
    let ids = t.encode("é");
    let first_byte = t
        .encode_bytes_for_test(&[0xC3])
        .expect("single bytes are tokens");
    assert!(ids.len() == 1);
    assert!(matches!(
        t.decode(&[first_byte]),
        Err(Error::InvalidUtf8 { .. })
    ));
}

impl Tokenizer {
    fn encode_bytes_for_test(&self, bytes: &[u8]) -> Option<u32> {
        self.vocab.ranks.get(bytes).copied()
    }
}

#[test]
fn embeddings_are_unit_vectors_and_near_duplicates_are_close() {
    let t = Tokenizer::new("cl100k_base").unwrap();
    let a = t.embed("status: 3 jobs running, 2 queued", 64);
    let b = t.embed("status: 3 jobs running, 2 queued", 64);
    let c = t.embed("the weather in Paris is sunny", 64);
    let dot = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(p, q)| p * q).sum::<f32>();
    assert!((dot(&a, &a) - 1.0).abs() < 1e-5);
    assert!((dot(&a, &b) - 1.0).abs() < 1e-5);
    assert!(dot(&a, &c) < 0.9);
    assert_eq!(t.embed("", 8), vec![0.0; 8]);
    let many = t.embed_many(&["x y", "x y"], 16).unwrap();
    assert_eq!(many[..16], many[16..]);
    assert!(t.embed_many(&["x"], 0).is_err());
}

#[test]
fn count_many_matches_count() {
    let t = Tokenizer::new("o200k_base").unwrap();
    let texts: Vec<String> = (0..2000)
        .map(|i| format!("message {i}: {}", "lorem ipsum ".repeat(i % 50)))
        .collect();
    let many = t.count_many(&texts).unwrap();
    for (text, &n) in texts.iter().zip(&many) {
        assert_eq!(n as usize, t.count(text));
    }
}
