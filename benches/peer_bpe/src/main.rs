//! `ctxwindow-peer-bpe ENCODING FILE...`: for each file (texts separated by NUL bytes), the token
//! count and the best single-thread time of counting every text with ctxwindow's core and with
//! the `bpe-openai` crate, one JSON object per line. Fails if the two counts differ.

use std::time::{Duration, Instant};

fn best_seconds(mut call: impl FnMut() -> usize) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let started = Instant::now();
        let mut loops = 0u32;
        while started.elapsed() < Duration::from_millis(300) || loops == 0 {
            std::hint::black_box(call());
            loops += 1;
        }
        best = best.min(started.elapsed().as_secs_f64() / f64::from(loops));
    }
    best
}

fn main() {
    let mut args = std::env::args().skip(1);
    let encoding = args
        .next()
        .expect("usage: ctxwindow-peer-bpe ENCODING FILE...");
    let ours = ctxwindow_core::Tokenizer::new(&encoding).expect("a known encoding");
    let peer = match encoding.as_str() {
        "cl100k_base" => bpe_openai::cl100k_base(),
        "o200k_base" => bpe_openai::o200k_base(),
        other => panic!("bpe-openai has no {other}"),
    };
    for path in args {
        let data = std::fs::read_to_string(&path).expect("a UTF-8 file");
        let texts: Vec<&str> = data.split('\0').collect();
        let count_ours = || texts.iter().map(|t| ours.count(t)).sum::<usize>();
        let count_peer = || texts.iter().map(|t| peer.count(*t)).sum::<usize>();
        let (tokens, peer_tokens) = (count_ours(), count_peer());
        assert_eq!(tokens, peer_tokens, "counts differ on {path}");
        let ours_s = best_seconds(count_ours);
        let peer_s = best_seconds(count_peer);
        println!(
            "{{\"file\": \"{path}\", \"tokens\": {tokens}, \"ctxwindow_core_s\": {ours_s}, \"bpe_openai_s\": {peer_s}}}"
        );
    }
}
