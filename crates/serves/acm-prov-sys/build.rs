use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=wrapper.h");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    bindgen::Builder::default()
        .header("wrapper.h")
        // The provider ABI plus the verbs/umad types the simulator and the
        // provider exchange with the daemon. Functions are left out: the
        // daemon's helpers are resolved at run time, not linked.
        .allowlist_type("acm_.*")
        .allowlist_type("ibv_path_record|ibv_path_data|ibv_gid|ibv_port_attr|ibv_device_attr")
        .allowlist_type("ibv_context|ibv_device|ibv_async_event|ibv_event_type|ibv_mtu|ibv_rate")
        .allowlist_type("ibv_port_state|ibv_node_type|ibv_transport_type|_compat_ibv_port_attr")
        .allowlist_type("ib_user_mad|ib_mad_addr|umad_sa_packet|umad_hdr|verbs_device|verbs_context")
        .allowlist_var("ACM_.*|IBV_PATH_.*|IBV_LINK_LAYER_.*|IB_LINK_LAYER_.*|IBV_SYSFS_.*")
        .allowlist_function("ibv_query_port|ibv_query_gid|ibv_query_pkey")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .derive_default(true)
        .derive_debug(true)
        .layout_tests(false)
        .generate()
        .expect("bindgen over <infiniband/acm_prov.h> (install ibacm, libibverbs-dev, libibumad-dev, libclang-dev)")
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings");
}
