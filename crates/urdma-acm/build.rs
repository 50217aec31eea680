fn main() {
    println!("cargo:rerun-if-changed=src/verbs_shim.c");
    cc::Build::new()
        .file("src/verbs_shim.c")
        .warnings(true)
        .compile("urdma_acm_verbs_shim");
    println!("cargo:rustc-link-lib=dylib=ibverbs");
}
