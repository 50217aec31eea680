//! Sizes and offsets the daemon was compiled with (contract §1.6, measured
//! with gcc on Debian 12). A mismatch here means the provider would read the
//! daemon's memory at the wrong places.
use acm_prov_sys::*;
use std::mem::{align_of, offset_of, size_of};

#[test]
fn acm_provider_is_the_120_byte_vtable() {
    assert_eq!(size_of::<acm_provider>(), 120);
    assert_eq!(offset_of!(acm_provider, size), 0);
    assert_eq!(offset_of!(acm_provider, version), 8);
    assert_eq!(offset_of!(acm_provider, name), 16);
    assert_eq!(offset_of!(acm_provider, open_device), 24);
    assert_eq!(offset_of!(acm_provider, close_device), 32);
    assert_eq!(offset_of!(acm_provider, open_port), 40);
    assert_eq!(offset_of!(acm_provider, close_port), 48);
    assert_eq!(offset_of!(acm_provider, open_endpoint), 56);
    assert_eq!(offset_of!(acm_provider, close_endpoint), 64);
    assert_eq!(offset_of!(acm_provider, add_address), 72);
    assert_eq!(offset_of!(acm_provider, remove_address), 80);
    assert_eq!(offset_of!(acm_provider, resolve), 88);
    assert_eq!(offset_of!(acm_provider, query), 96);
    assert_eq!(offset_of!(acm_provider, handle_event), 104);
    assert_eq!(offset_of!(acm_provider, query_perf), 112);
}

#[test]
fn message_layouts() {
    assert_eq!((size_of::<acm_hdr>(), align_of::<acm_hdr>()), (16, 8));
    assert_eq!(offset_of!(acm_hdr, version), 0);
    assert_eq!(offset_of!(acm_hdr, opcode), 1);
    assert_eq!(offset_of!(acm_hdr, status), 2);
    assert_eq!(offset_of!(acm_hdr, data), 3);
    assert_eq!(offset_of!(acm_hdr, length), 6);
    assert_eq!(offset_of!(acm_hdr, tid), 8);
    assert_eq!(size_of::<acm_ep_info>(), 64);
    assert_eq!(size_of::<acm_ep_addr_data>(), 72);
    assert_eq!(offset_of!(acm_ep_addr_data, flags), 0);
    assert_eq!(offset_of!(acm_ep_addr_data, type_), 4);
    assert_eq!(offset_of!(acm_ep_addr_data, reserved), 6);
    assert_eq!(offset_of!(acm_ep_addr_data, info), 8);
    assert_eq!(size_of::<acm_ep_config_data>(), 80);
    assert_eq!(offset_of!(acm_ep_config_data, dev_guid), 0);
    assert_eq!(offset_of!(acm_ep_config_data, port_num), 8);
    assert_eq!(offset_of!(acm_ep_config_data, phys_port_cnt), 9);
    assert_eq!(offset_of!(acm_ep_config_data, pkey), 12);
    assert_eq!(offset_of!(acm_ep_config_data, addr_cnt), 14);
    assert_eq!(offset_of!(acm_ep_config_data, prov_name), 16);
    assert_eq!(size_of::<acm_msg>(), 592);
    assert_eq!(ACM_MSG_SIZE, 592);
    assert_eq!(offset_of!(acm_msg, hdr), 0);
}

#[test]
fn path_record_is_the_64_byte_sa_attribute() {
    assert_eq!(
        (size_of::<ibv_path_record>(), align_of::<ibv_path_record>()),
        (64, 8)
    );
    assert_eq!(offset_of!(ibv_path_record, service_id), 0);
    assert_eq!(offset_of!(ibv_path_record, dgid), 8);
    assert_eq!(offset_of!(ibv_path_record, sgid), 24);
    assert_eq!(offset_of!(ibv_path_record, dlid), 40);
    assert_eq!(offset_of!(ibv_path_record, slid), 42);
    assert_eq!(offset_of!(ibv_path_record, flowlabel_hoplimit), 44);
    assert_eq!(offset_of!(ibv_path_record, tclass), 48);
    assert_eq!(offset_of!(ibv_path_record, reversible_numpath), 49);
    assert_eq!(offset_of!(ibv_path_record, pkey), 50);
    assert_eq!(offset_of!(ibv_path_record, qosclass_sl), 52);
    assert_eq!(offset_of!(ibv_path_record, mtu), 54);
    assert_eq!(offset_of!(ibv_path_record, rate), 55);
    assert_eq!(offset_of!(ibv_path_record, packetlifetime), 56);
    assert_eq!(offset_of!(ibv_path_record, preference), 57);
    assert_eq!(offset_of!(ibv_path_record, reserved), 58);
    // An ACM_EP_INFO_PATH entry is handed to the kernel as ibv_path_data.
    assert_eq!(size_of::<ibv_path_data>(), size_of::<acm_ep_addr_data>());
}

#[test]
fn objects_the_daemon_passes() {
    assert_eq!(size_of::<acm_device>(), 16);
    assert_eq!(offset_of!(acm_device, verbs), 0);
    assert_eq!(offset_of!(acm_device, dev_guid), 8);
    assert_eq!(size_of::<acm_port>(), 16);
    assert_eq!(offset_of!(acm_port, port_num), 8);
    assert_eq!(size_of::<acm_endpoint>(), 16);
    assert_eq!(offset_of!(acm_endpoint, pkey), 8);
    assert_eq!(size_of::<acm_address>(), 88);
    assert_eq!(offset_of!(acm_address, endpoint), 0);
    assert_eq!(offset_of!(acm_address, info), 8);
    assert_eq!(offset_of!(acm_address, id_string), 72);
    assert_eq!(offset_of!(acm_address, type_), 80);
}

#[test]
fn sa_mad_layouts() {
    assert_eq!(size_of::<acm_sa_mad>(), 328);
    assert_eq!(offset_of!(acm_sa_mad, context), 0);
    assert_eq!(offset_of!(acm_sa_mad, umad), 8);
    assert_eq!(offset_of!(acm_sa_mad, sa_mad), 72);
    assert_eq!(
        (size_of::<ib_user_mad>(), align_of::<ib_user_mad>()),
        (64, 4)
    );
    assert_eq!(offset_of!(ib_user_mad, addr), 20);
    assert_eq!(size_of::<ib_mad_addr>(), 44);
    assert_eq!(offset_of!(ib_mad_addr, __bindgen_anon_1), 16);
    assert_eq!(offset_of!(ib_mad_addr, flow_label), 32);
    assert_eq!(offset_of!(ib_mad_addr, pkey_index), 36);
    assert_eq!(size_of::<umad_sa_packet>(), 256);
    assert_eq!(offset_of!(umad_sa_packet, comp_mask), 48);
    assert_eq!(offset_of!(umad_sa_packet, data), 56);
}

#[test]
fn codes_match_the_contract() {
    assert_eq!(ACM_PATH_FLAGS_PRIMARY_ROUTE, 0x2B);
    assert_eq!(
        (
            ACM_OP_RESOLVE,
            ACM_OP_PERF_QUERY,
            ACM_OP_EP_QUERY,
            ACM_OP_ACK
        ),
        (1, 2, 3, 0x80)
    );
    assert_eq!(
        (
            ACM_STATUS_ENODATA,
            ACM_STATUS_ESRCADDR,
            ACM_STATUS_EDESTTYPE
        ),
        (3, 7, 10)
    );
    assert_eq!((ACM_FLAGS_NODELAY, ACM_FLAGS_QUERY_SA), (1 << 30, 1 << 31));
    assert_eq!(
        (ACM_CNTR_ERROR, ACM_CNTR_ROUTE_CACHE, ACM_MAX_COUNTER),
        (0, 6, 7)
    );
    assert_eq!(
        (ACM_ADDRESS_NAME, ACM_ADDRESS_GID, ACM_ADDRESS_LID),
        (1, 4, 5)
    );
}
