//! The committed header must equal what the pinned cbindgen generates from this crate.
//! `CTXWINDOW_UPDATE_HEADER=1` rewrites it (`make header`).

use std::path::Path;

#[test]
fn header_is_current() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("config");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut generated);
    let generated = String::from_utf8(generated).expect("header is UTF-8");
    let path = crate_dir.join("include").join("ctxwindow.h");
    if std::env::var_os("CTXWINDOW_UPDATE_HEADER").is_some() {
        std::fs::write(&path, &generated).expect("write header");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/ctxwindow.h is out of date: run `make header` and commit it"
    );
}
