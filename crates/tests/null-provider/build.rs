use std::{env, fs, path::PathBuf};

fn main() {
    // Like the real provider: nothing but the entry point is exported.
    let script = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("exports.map");
    fs::write(&script, "{\n  global: provider_query;\n  local: *;\n};\n")
        .expect("write version script");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        script.display()
    );
}
