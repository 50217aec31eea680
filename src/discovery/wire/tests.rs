use super::*;

fn txid(n: u64) -> NonZeroU64 {
    NonZeroU64::new(n).unwrap()
}

fn addr(s: &str) -> WireAddress {
    WireAddress::new(Address::parse_host(s).unwrap()).unwrap()
}

fn gid(s: &str) -> Gid {
    s.parse().unwrap()
}

/// The endpoint of the specification's example.
fn node1() -> EndpointRecord {
    EndpointRecord::new(
        gid("fe80::5054:ff:fe12:3456"),
        7,
        5,
        16,
        vec![0xffff],
        vec![addr("node1"), addr("10.0.0.1"), addr("fd00::1")],
    )
    .unwrap()
}

fn node2() -> EndpointRecord {
    EndpointRecord::new(
        gid("fe80::5054:ff:fe12:3457"),
        0,
        4,
        3,
        vec![0xffff, 0x8001],
        vec![addr("node2"), addr("10.0.0.2"), addr("fd00::2")],
    )
    .unwrap()
}

/// The largest record there is: every count and every name at its bound.
fn biggest_record() -> EndpointRecord {
    let names = (0..MAX_ADDRESSES)
        .map(|i| addr(&format!("{i}").repeat(MAX_NAME_LEN)))
        .collect();
    let pkeys = (1..=MAX_PKEYS as u16).collect();
    EndpointRecord::new(gid("fd00::1:2"), 0xbfff, 5, 63, pkeys, names).unwrap()
}

fn golden_query() -> Message {
    Query::new(txid(0x0123_4567_89ab_cdef), addr("10.0.0.2"), node1()).into()
}

#[rustfmt::skip]
const GOLDEN_PREFIX: [u8; 77] = [
    // header: magic, version 1, type QUERY, flags, txid
    0x55, 0x52, 0x44, 0x44, 0x01, 0x01, 0x00, 0x00,
    0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
    // target: IPv4, 4 bytes, 10.0.0.2
    0x02, 0x04, 0x0a, 0x00, 0x00, 0x02,
    // sender: GID fe80::5054:ff:fe12:3456
    0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56,
    // LID 7, MTU 4096, rate 100 Gb/s, 1 P_Key, 3 addresses, P_Key
    0x00, 0x07, 0x05, 0x10, 0x01, 0x03, 0xff, 0xff,
    // name "node1", IPv4 10.0.0.1, IPv6 fd00::1
    0x01, 0x05, b'n', b'o', b'd', b'e', b'1',
    0x02, 0x04, 0x0a, 0x00, 0x00, 0x01,
    0x03, 0x10, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
];

fn hexdump(b: &[u8]) -> String {
    b.chunks(16)
        .enumerate()
        .map(|(i, line)| {
            let hex: Vec<String> = line.iter().map(|x| format!("{x:02x}")).collect();
            format!("{:04x}  {}\n", i * 16, hex.join(" "))
        })
        .collect()
}

#[test]
fn sizes_are_the_documented_ones() {
    assert_eq!(MAX_ADDRESS_LEN, 65);
    assert_eq!(MAX_RECORD_LEN, 558);
    assert_eq!(MAX_REPLY_LEN, 640);
    assert_eq!(QUERY_LEN, 640);
    assert_eq!(MAX_ANNOUNCE_LEN, 1133);
    assert_eq!(MAX_MESSAGE_LEN, 1133);
    assert_eq!(MAX_DATAGRAM_LEN, 1177);
    assert_eq!(biggest_record().encoded_len(), MAX_RECORD_LEN);
}

#[test]
fn golden_query_is_byte_exact() {
    let bytes = golden_query().encode();
    let mut want = GOLDEN_PREFIX.to_vec();
    want.resize(QUERY_LEN, 0);
    assert_eq!(bytes, want);
    assert_eq!(Message::decode(&want), Ok(golden_query()));
}

#[test]
fn specification_shows_the_golden_query() {
    let spec = include_str!("../../../docs/protocol.md");
    // Through the end of the line holding the last byte before padding.
    let dump = hexdump(&golden_query().encode()[..80]);
    assert!(spec.contains(&dump), "docs/protocol.md lacks:\n{dump}");
    assert!(spec.contains("0050 .. 027f  00 (padding to 640 bytes)"));
}

fn samples() -> Vec<Message> {
    let q = Query::new(txid(42), addr("node2"), node1());
    let found = q.reply(Answer::Found(node2())).unwrap();
    let refused = q.reply(Answer::Refused).unwrap();
    let big = biggest_record();
    let big_target = big.addresses()[MAX_ADDRESSES - 1].clone();
    vec![
        golden_query(),
        q.into(),
        Query::new(txid(u64::MAX), big_target.clone(), big.clone()).into(),
        found.into(),
        refused.into(),
        Reply::new(txid(1), big_target, Answer::Found(big.clone()))
            .unwrap()
            .into(),
        Announce::new(vec![node1()], false).unwrap().into(),
        Announce::new(vec![node1(), node2()], true).unwrap().into(),
        Announce::new(vec![big.clone(), node1()], false)
            .unwrap()
            .into(),
    ]
}

#[test]
fn every_message_type_round_trips() {
    for m in samples() {
        let b = m.encode();
        assert!(b.len() <= MAX_MESSAGE_LEN);
        assert_eq!(Message::decode(&b), Ok(m.clone()), "{m:?}");
        if let Message::Query(_) = m {
            assert_eq!(b.len(), QUERY_LEN);
        }
    }
}

#[test]
fn no_reply_is_larger_than_any_query() {
    let big = biggest_record();
    let target = big.addresses()[0].clone();
    let reply: Message = Reply::new(txid(9), target.clone(), Answer::Found(big))
        .unwrap()
        .into();
    let largest_reply = reply.encode().len();
    assert_eq!(largest_reply, MAX_REPLY_LEN);
    // The smallest query there is: shortest target, smallest sender.
    let tiny = EndpointRecord::new(gid("fe80::1"), 0, 1, 2, vec![0x7fff], vec![addr("a")]).unwrap();
    let smallest_query: Message = Query::new(txid(9), addr("b"), tiny).into();
    assert!(largest_reply <= smallest_query.encode().len());
    for m in samples() {
        if let Message::Reply(_) = m {
            assert!(m.encode().len() <= QUERY_LEN);
        }
    }
}

#[test]
fn addresses_that_cannot_travel_are_refused() {
    assert_eq!(
        WireAddress::new(Address::Gid(gid("fe80::1"))),
        Err(WireError::UnsupportedAddressType(4))
    );
    assert_eq!(
        WireAddress::new(Address::Lid(1)),
        Err(WireError::UnsupportedAddressType(5))
    );
    assert_eq!(
        WireAddress::new(Address::Name("a".repeat(64).into())),
        Err(WireError::BadAddressLength { kind: 1, len: 64 })
    );
    assert_eq!(
        WireAddress::new(Address::Name("".into())),
        Err(WireError::BadAddressLength { kind: 1, len: 0 })
    );
    assert_eq!(
        WireAddress::new(Address::Name("a b".into())),
        Err(WireError::BadName)
    );
    // Built around Address::name, so upper case is folded, not refused.
    assert_eq!(
        WireAddress::new(Address::Name("Node1".into())),
        Ok(addr("node1"))
    );
}

#[test]
fn constructors_enforce_the_record_rules() {
    let g = gid("fe80::1");
    let a = || vec![addr("x")];
    let rec = |gid, lid, mtu, rate, pkeys: Vec<u16>, addrs| {
        EndpointRecord::new(gid, lid, mtu, rate, pkeys, addrs)
    };
    assert_eq!(
        rec(Gid::default(), 0, 5, 3, vec![1], a()),
        Err(WireError::BadGid(Gid::default()))
    );
    assert!(matches!(
        rec(gid("ff02::1"), 0, 5, 3, vec![1], a()),
        Err(WireError::BadGid(_))
    ));
    assert_eq!(
        rec(g, 0xc000, 5, 3, vec![1], a()),
        Err(WireError::BadLid(0xc000))
    );
    assert_eq!(rec(g, 0, 0, 3, vec![1], a()), Err(WireError::BadMtu(0)));
    assert_eq!(rec(g, 0, 6, 3, vec![1], a()), Err(WireError::BadMtu(6)));
    assert_eq!(rec(g, 0, 5, 1, vec![1], a()), Err(WireError::BadRate(1)));
    assert_eq!(rec(g, 0, 5, 64, vec![1], a()), Err(WireError::BadRate(64)));
    assert_eq!(
        rec(g, 0, 5, 3, vec![], a()),
        Err(WireError::BadPkeyCount(0))
    );
    assert_eq!(
        rec(g, 0, 5, 3, (1..=9).collect(), a()),
        Err(WireError::BadPkeyCount(9))
    );
    assert_eq!(
        rec(g, 0, 5, 3, vec![0x8000], a()),
        Err(WireError::BadPkey(0x8000))
    );
    assert_eq!(
        rec(g, 0, 5, 3, vec![0xffff, 0x7fff], a()),
        Err(WireError::DuplicatePkey(0x7fff))
    );
    assert_eq!(
        rec(g, 0, 5, 3, vec![1], vec![]),
        Err(WireError::BadAddressCount(0))
    );
    let nine = (0..9).map(|i| addr(&format!("h{i}"))).collect();
    assert_eq!(
        rec(g, 0, 5, 3, vec![1], nine),
        Err(WireError::BadAddressCount(9))
    );
    assert_eq!(
        rec(g, 0, 5, 3, vec![1], vec![addr("x"), addr("X")]),
        Err(WireError::DuplicateAddress(Address::name("x").unwrap()))
    );
}

#[test]
fn constructors_enforce_the_message_rules() {
    assert_eq!(
        Reply::new(txid(1), addr("10.9.9.9"), Answer::Found(node1())),
        Err(WireError::TargetNotInRecord)
    );
    assert!(Reply::new(txid(1), addr("10.9.9.9"), Answer::Refused).is_ok());
    assert_eq!(
        Announce::new(vec![], false),
        Err(WireError::BadRecordCount(0))
    );
    assert_eq!(
        Announce::new(vec![node1(), node2(), node2()], false),
        Err(WireError::BadRecordCount(3))
    );
    assert_eq!(
        Announce::new(vec![node1(), node1()], false),
        Err(WireError::DuplicateAddress(Address::name("node1").unwrap()))
    );
}

/// `bytes` with `patch` written at `at`.
fn patched(bytes: &[u8], at: usize, patch: &[u8]) -> Vec<u8> {
    let mut b = bytes.to_vec();
    b[at..at + patch.len()].copy_from_slice(patch);
    b
}

fn decode_err(b: &[u8]) -> WireError {
    Message::decode(b).expect_err("decoded")
}

// Offsets in the golden query (see GOLDEN_PREFIX).
const TARGET: usize = 16;
const SENDER: usize = 22;
const LID: usize = SENDER + 16;
const MTU: usize = LID + 2;
const RATE: usize = MTU + 1;
const NPKEYS: usize = RATE + 1;
const NADDRS: usize = NPKEYS + 1;
const PKEY: usize = NADDRS + 1;
const NAME_ADDR: usize = PKEY + 2;

#[test]
fn a_query_cut_short_still_names_its_transaction() {
    let bytes = golden_query().encode();
    assert_eq!(
        Message::query_txid(&bytes[..520]),
        Some(txid(0x0123_4567_89ab_cdef))
    );
    assert_eq!(Message::query_txid(&bytes[..15]), None);
    let mut reply = bytes.clone();
    reply[5] = TYPE_REPLY;
    assert_eq!(Message::query_txid(&reply), None, "only our own queries");
    assert_eq!(
        Message::query_txid(b"URDX\x01\x01\0\0\0\0\0\0\0\0\0\x07"),
        None
    );
}

#[test]
fn rejects_bad_headers() {
    let q = golden_query().encode();
    assert_eq!(decode_err(&[]), WireError::Truncated("header"));
    assert_eq!(decode_err(&q[..15]), WireError::Truncated("header"));
    assert_eq!(
        decode_err(&patched(&q, 0, b"URDX")),
        WireError::BadMagic(*b"URDX")
    );
    assert_eq!(decode_err(&patched(&q, 4, &[2])), WireError::BadVersion(2));
    assert_eq!(decode_err(&patched(&q, 4, &[0])), WireError::BadVersion(0));
    assert_eq!(decode_err(&patched(&q, 5, &[0])), WireError::BadType(0));
    assert_eq!(decode_err(&patched(&q, 5, &[4])), WireError::BadType(4));
    assert_eq!(
        decode_err(&patched(&q, 6, &[0x80, 0])),
        WireError::AuthUnsupported
    );
    assert_eq!(decode_err(&patched(&q, 6, &[0, 2])), WireError::BadFlags(2));
    // The authenticated decoder wants the flag, and takes nothing else
    // the plain one refuses.
    assert_eq!(
        Message::decode_authenticated(&q),
        Err(WireError::NotAuthenticated)
    );
    assert!(Message::decode_authenticated(&patched(&q, 6, &[0x80, 0])).is_ok());
    assert_eq!(
        Message::decode_authenticated(&patched(&q, 6, &[0x80, 2])),
        Err(WireError::BadFlags(2))
    );
    // Withdrawn means something only on an announce.
    assert_eq!(decode_err(&patched(&q, 6, &[0, 1])), WireError::BadFlags(1));
    assert_eq!(decode_err(&patched(&q, 8, &[0; 8])), WireError::ZeroTxid);
    let big = vec![0; MAX_MESSAGE_LEN + 1];
    assert_eq!(decode_err(&big), WireError::TooLong(MAX_MESSAGE_LEN + 1));
}

#[test]
fn rejects_unpadded_or_overlong_queries() {
    let q = golden_query().encode();
    assert_eq!(decode_err(&q[..77]), WireError::UnpaddedQuery(77));
    assert_eq!(
        decode_err(&q[..QUERY_LEN - 1]),
        WireError::UnpaddedQuery(QUERY_LEN - 1)
    );
    assert_eq!(
        decode_err(&patched(&q, 600, &[1])),
        WireError::NonZeroPadding
    );
    let mut long = q.clone();
    long.push(0);
    assert_eq!(decode_err(&long), WireError::TrailingBytes(1));
}

#[test]
fn rejects_bad_addresses() {
    let q = golden_query().encode();
    assert_eq!(
        decode_err(&patched(&q, TARGET, &[4])),
        WireError::UnsupportedAddressType(4)
    );
    assert_eq!(
        decode_err(&patched(&q, TARGET, &[0])),
        WireError::UnsupportedAddressType(0)
    );
    assert_eq!(
        decode_err(&patched(&q, TARGET, &[3])),
        WireError::BadAddressLength { kind: 3, len: 4 }
    );
    assert_eq!(
        decode_err(&patched(&q, TARGET + 1, &[5])),
        WireError::BadAddressLength { kind: 2, len: 5 }
    );
    let name_len = NAME_ADDR + 1;
    assert_eq!(
        decode_err(&patched(&q, name_len, &[0])),
        WireError::BadAddressLength { kind: 1, len: 0 }
    );
    assert_eq!(
        decode_err(&patched(&q, name_len, &[64])),
        WireError::BadAddressLength { kind: 1, len: 64 }
    );
    for bad in [b' ', 0x7f, 0x80, 0, b'N'] {
        assert_eq!(
            decode_err(&patched(&q, name_len + 1, &[bad])),
            WireError::BadName,
            "{bad:#x}"
        );
    }
    // "node1" turned into "10.0.0.1"'s duplicate is impossible by length,
    // so duplicate the IPv4 entry over the IPv6 one instead.
    let v4 = q[NAME_ADDR + 7..NAME_ADDR + 13].to_vec();
    let mut dup = q[..NAME_ADDR + 13].to_vec();
    dup.extend_from_slice(&v4);
    dup[NADDRS] = 3;
    dup.resize(QUERY_LEN, 0);
    assert_eq!(
        decode_err(&dup),
        WireError::DuplicateAddress(Address::Ip4(Ipv4Addr::new(10, 0, 0, 1)))
    );
}

#[test]
fn rejects_bad_records() {
    let q = golden_query().encode();
    assert!(matches!(
        decode_err(&patched(&q, SENDER, &[0xff])),
        WireError::BadGid(_)
    ));
    // (field, bytes written there, the error that names it)
    let cases: [(usize, &[u8], WireError); 11] = [
        (SENDER, &[0; 16], WireError::BadGid(Gid::default())),
        (LID, &[0xff, 0xff], WireError::BadLid(0xffff)),
        (MTU, &[0], WireError::BadMtu(0)),
        (RATE, &[0], WireError::BadRate(0)),
        (NPKEYS, &[0], WireError::BadPkeyCount(0)),
        (NPKEYS, &[9], WireError::BadPkeyCount(9)),
        (NPKEYS, &[255], WireError::BadPkeyCount(255)),
        (NADDRS, &[0], WireError::BadAddressCount(0)),
        (NADDRS, &[9], WireError::BadAddressCount(9)),
        (PKEY, &[0, 0], WireError::BadPkey(0)),
        // One address more than there is: the zero padding is read as
        // an address of type 0.
        (NADDRS, &[4], WireError::UnsupportedAddressType(0)),
    ];
    for (at, bytes, want) in cases {
        assert_eq!(
            decode_err(&patched(&q, at, bytes)),
            want,
            "{bytes:?} at {at}"
        );
    }
}

#[test]
fn rejects_bad_replies() {
    let q = Query::new(txid(5), addr("node2"), node1());
    let found: Message = q.reply(Answer::Found(node2())).unwrap().into();
    let f = found.encode();
    assert_eq!(decode_err(&patched(&f, 16, &[0])), WireError::BadStatus(0));
    assert_eq!(decode_err(&patched(&f, 16, &[3])), WireError::BadStatus(3));
    assert_eq!(decode_err(&f[..16]), WireError::Truncated("reply status"));
    assert_eq!(decode_err(&f[..18]), WireError::Truncated("reply target"));
    assert_eq!(
        decode_err(&f[..f.len() - 1]),
        WireError::Truncated("reply record")
    );
    let mut long = f.clone();
    long.push(0);
    assert_eq!(decode_err(&long), WireError::TrailingBytes(1));
    // Asked node2, answered with a record of node2's that lacks it.
    let other = patched(&f, 19, b"nodex");
    assert_eq!(decode_err(&other), WireError::TargetNotInRecord);
    // A refusal carries no record.
    let refused: Message = q.reply(Answer::Refused).unwrap().into();
    let r = refused.encode();
    assert_eq!(r.len(), 16 + 1 + 2 + 5);
    assert_eq!(
        decode_err(&patched(&f, 16, &[2])),
        WireError::TrailingBytes(f.len() - r.len())
    );
    assert_eq!(decode_err(&patched(&r, 8, &[0; 8])), WireError::ZeroTxid);
}

#[test]
fn rejects_bad_announces() {
    let one: Message = Announce::new(vec![node1()], false).unwrap().into();
    let a = one.encode();
    assert_eq!(
        decode_err(&patched(&a, 15, &[1])),
        WireError::AnnounceTxid(1)
    );
    assert_eq!(
        decode_err(&patched(&a, 16, &[0])),
        WireError::BadRecordCount(0)
    );
    assert_eq!(
        decode_err(&patched(&a, 16, &[3])),
        WireError::BadRecordCount(3)
    );
    assert_eq!(
        decode_err(&patched(&a, 16, &[2])),
        WireError::Truncated("announce record")
    );
    assert_eq!(decode_err(&patched(&a, 6, &[0, 3])), WireError::BadFlags(2));
    assert_eq!(decode_err(&a[..16]), WireError::Truncated("announce count"));
    let mut long = a.clone();
    long.extend_from_slice(&[0; 3]);
    assert_eq!(decode_err(&long), WireError::TrailingBytes(3));
    let mut twice = a.clone();
    twice.extend_from_slice(&a[17..]);
    twice[16] = 2;
    assert_eq!(
        decode_err(&twice),
        WireError::DuplicateAddress(Address::name("node1").unwrap())
    );
    match Message::decode(&patched(&a, 6, &[0, 1])) {
        Ok(Message::Announce(w)) => assert!(w.withdrawn()),
        other => panic!("{other:?}"),
    }
}

/// xorshift64: deterministic, so a failure reproduces.
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
    fn byte(&mut self) -> u8 {
        // Mostly the values length and count checks hinge on.
        const EDGES: [u8; 12] = [0, 1, 2, 3, 4, 8, 9, 16, 63, 64, 0x80, 0xff];
        if self.next() & 1 == 0 {
            EDGES[self.below(EDGES.len())]
        } else {
            self.next() as u8
        }
    }
}

#[test]
fn mutated_messages_never_panic_and_decode_canonically() {
    let seeds: Vec<Vec<u8>> = samples().iter().map(Message::encode).collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut decoded = 0;
    for _ in 0..20_000 {
        let mut b = seeds[rng.below(seeds.len())].clone();
        for _ in 0..=rng.below(4) {
            match rng.below(7) {
                0 if !b.is_empty() => {
                    let i = rng.below(b.len());
                    b[i] ^= 1 << rng.below(8);
                }
                1 if !b.is_empty() => {
                    let i = rng.below(b.len());
                    b[i] = rng.byte();
                }
                2 => {
                    let n = rng.below(b.len() + 1);
                    b.truncate(n);
                }
                3 => {
                    for _ in 0..=rng.below(64) {
                        b.push(rng.byte());
                    }
                }
                4 => {
                    let i = rng.below(b.len() + 1);
                    b.insert(i, rng.byte());
                }
                5 if !b.is_empty() => {
                    let i = rng.below(b.len());
                    b.remove(i);
                }
                _ => {
                    // Header fields, where one byte changes the meaning.
                    let i = rng.below(HEADER_LEN.min(b.len()));
                    if let Some(x) = b.get_mut(i) {
                        *x = rng.byte();
                    }
                }
            }
        }
        // Decoding is the inverse of encoding: whatever is accepted
        // re-encodes to the same bytes.
        if let Ok(m) = Message::decode(&b) {
            decoded += 1;
            assert_eq!(m.encode(), b, "{m:?}");
        }
    }
    // Some mutations (a flipped txid or address byte) stay valid; if
    // none did, the loop would only ever exercise the first checks.
    assert!(decoded > 100, "{decoded}");
    for len in [0, 1, 16, 17, 100, QUERY_LEN, MAX_MESSAGE_LEN] {
        for _ in 0..200 {
            let noise: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let _ = Message::decode(&noise);
        }
    }
}
