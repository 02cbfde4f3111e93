//! iked's configuration parser on arbitrary text: an error or a configuration, never a
//! panic; an error names a position inside the text; and a configuration compared with
//! itself is an empty reload (every connection unchanged).
#![no_main]

use std::path::Path;

use iked::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match Config::parse(&text, Path::new("fuzz.conf")) {
        Ok(config) => {
            let d = Config::diff(&config, &config);
            assert!(d.is_empty());
            assert_eq!(d.unchanged.len(), config.connections.len());
        }
        Err(e) => {
            let lines = text.split('\n').count();
            assert!(e.line >= 1 && e.line <= lines && e.column >= 1, "{e}");
        }
    }
});
