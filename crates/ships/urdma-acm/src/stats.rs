//! `urdma-acm stats`: the per-endpoint counters of a running daemon, asked
//! over its unix socket the way `ib_acme -e` and `ib_acme -P s -s ADDR`
//! ask: endpoints are enumerated with EP queries across all ports, then
//! each endpoint's counters are read with a perf query naming its first
//! address as the source. (Perf queries by endpoint index hit a daemon bug
//! that looks endpoint N up on port N.)

use crate::report::{Row, COUNTERS};
pub use acm_proto::msg::Endpoint;
use acm_proto::msg::{self, MsgBuf, HDR_LEN};
use acm_prov_sys::{
    ACM_EP_FLAG_SOURCE, ACM_STATUS_EINVAL, ACM_STATUS_ESRCADDR, ACM_STATUS_SUCCESS,
};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Where Debian's daemon (and `ib_acme` by default) listens.
pub const DEFAULT_SOCKET: &str = "/run/ibacm-unix.sock";
/// The daemon answers on its event loop at once; a daemon that does not
/// answer in this time is stuck.
const TIMEOUT: Duration = Duration::from_secs(5);

#[derive(clap::Args, Debug)]
#[command(after_help = "\
One row per endpoint (one per port and partition with an address), in the
daemon's order: GUID (the device's node GUID), PORT, PKEY, PROVIDER (the
provider serving it; counters of other providers mean what they define),
ADDRESS (its first address, which the counters were asked by), then the
provider's seven counters since the daemon started:

  error        requests answered with an error other than ENODATA
               (e.g. ETIMEDOUT when discovery got no answer)
  resolve      resolve and verify requests made from the endpoint
  no_data      requests answered ENODATA (destination unknown)
  addr_query   destinations the endpoint's cache did not hold, looked up
               in local addresses, the hosts file, then by discovery
  addr_cache   destinations whose address was cached but whose path had
               expired (urdma_route_timeout) and was rebuilt
  route_query  paths built (after a lookup or an addr_cache hit)
  route_cache  requests answered from the path cache

`ib_acme -P s -s ADDRESS` shows the same counters for one endpoint.")]
pub struct Args {
    /// The daemon's unix socket (like ib_acme -S).
    #[arg(short = 'S', long = "socket", value_name = "PATH", default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// The provider's metrics file [default: urdma_metrics_file of the
    /// options file, else /run/ibacm-urdma.prom].
    #[arg(short = 'M', long = "metrics", value_name = "PATH")]
    pub metrics: Option<PathBuf>,
    /// The daemon's options file, for urdma_metrics_file.
    #[arg(short = 'O', long = "opts", value_name = "FILE", default_value = crate::daemon::DEFAULT_OPTS_FILE)]
    pub opts: PathBuf,
    /// Everything as one JSON object.
    #[arg(long, conflicts_with = "prometheus")]
    pub json: bool,
    /// The endpoints' counters in the Prometheus text format, for
    /// node_exporter's textfile collector beside the provider's own file.
    #[arg(long)]
    pub prometheus: bool,
    /// Writes the output to FILE instead of stdout, atomically (a new file
    /// renamed over the old): a reader never sees half of one, and on an
    /// error the old file stays.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Decodes an EP query reply, whole as read: `Ok(None)` past the last
/// endpoint.
pub fn parse_ep_reply(reply: &[u8]) -> Result<Option<Endpoint>, String> {
    match u32::from(MsgBuf::from_bytes(reply).status()) {
        ACM_STATUS_SUCCESS => {}
        ACM_STATUS_EINVAL => return Ok(None),
        s => {
            return Err(format!(
                "the daemon answered the endpoint query with status {s}"
            ))
        }
    }
    let short = || format!("short endpoint reply ({} bytes)", reply.len());
    Endpoint::decode(reply).map(Some).ok_or_else(short)
}

/// Decodes a perf query reply into its counters.
pub fn parse_perf_reply(reply: &MsgBuf, address: &str) -> Result<Vec<u64>, String> {
    match u32::from(reply.status()) {
        ACM_STATUS_SUCCESS => {}
        ACM_STATUS_ESRCADDR => {
            return Err(format!(
                "no endpoint owns {address} any more (port went down?)"
            ))
        }
        s => {
            return Err(format!(
                "the daemon answered the counter query for {address} with status {s}"
            ))
        }
    }
    reply
        .counters()
        .ok_or_else(|| format!("short counter reply for {address}"))
}

/// One request and its whole reply (the daemon sends each in one piece,
/// its length in the header, big-endian for these opcodes). An EP reply
/// may be longer than a `struct acm_msg`: 64 bytes per address.
fn exchange(sock: &mut UnixStream, request: &MsgBuf) -> Result<Vec<u8>, String> {
    let io = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => "the daemon closed the connection".to_string(),
        _ => format!("talking to the daemon: {e}"),
    };
    sock.write_all(request.bytes()).map_err(io)?;
    let mut reply = vec![0; HDR_LEN];
    sock.read_exact(&mut reply).map_err(io)?;
    let len = MsgBuf::from_bytes(&reply).message_len();
    if len < HDR_LEN {
        return Err(format!("bad reply length {len} from the daemon"));
    }
    reply.resize(len, 0);
    sock.read_exact(&mut reply[HDR_LEN..]).map_err(io)?;
    Ok(reply)
}

/// The counters of the endpoint that owns `address`.
fn counters(sock: &mut UnixStream, address: &str) -> Result<Vec<u64>, String> {
    let Some(source) = msg::address_entry(ACM_EP_FLAG_SOURCE, address) else {
        return Err(format!(
            "cannot ask by '{address}' (neither an IP address nor a name of 1 to 63 bytes)"
        ));
    };
    let reply = exchange(sock, &msg::perf_query(&source))?;
    parse_perf_reply(&MsgBuf::from_bytes(&reply), address)
}

/// Every endpoint with its counters (`Err` per endpoint whose counters
/// could not be read).
pub fn collect(sock: &mut UnixStream) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for index in 1..=u8::MAX {
        let Some(ep) = parse_ep_reply(&exchange(sock, &msg::ep_query(index))?)? else {
            break;
        };
        let counters = match ep.addresses.first() {
            Some(a) => counters(sock, a),
            None => Err("the endpoint has no address to ask by".to_string()),
        };
        rows.push((ep, counters));
    }
    Ok(rows)
}

/// The table: a header line, then one line per endpoint, columns aligned.
pub fn table(rows: &[Row]) -> String {
    let mut cells: Vec<Vec<String>> = vec![["GUID", "PORT", "PKEY", "PROVIDER", "ADDRESS"]
        .iter()
        .map(|s| s.to_string())
        .chain(COUNTERS.iter().map(|c| c.to_ascii_uppercase()))
        .collect()];
    for (ep, counters) in rows {
        let mut row = vec![
            format!("{:#018x}", ep.guid),
            ep.port.to_string(),
            format!("{:#06x}", ep.pkey),
            ep.provider.clone(),
            ep.addresses.first().cloned().unwrap_or_else(|| "-".into()),
        ];
        match counters {
            Ok(values) => row.extend(
                (0..COUNTERS.len()).map(|i| values.get(i).map_or("-".into(), u64::to_string)),
            ),
            Err(e) => row.push(format!("({e})")),
        }
        cells.push(row);
    }
    aligned(&cells).iter().map(|l| format!("{l}\n")).collect()
}

/// `rows` as lines of columns two spaces apart, each as wide as its widest
/// cell; a row may be shorter than the others.
pub fn aligned(rows: &[Vec<String>]) -> Vec<String> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(String::len)
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|row| {
            let line: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell:<w$}"))
                .collect();
            line.join("  ").trim_end().to_string()
        })
        .collect()
}

/// Every endpoint of the daemon at `socket` with its counters.
fn ask(socket: &std::path::Path) -> Result<Vec<Row>, String> {
    let mut sock = UnixStream::connect(socket).map_err(|e| {
        format!(
            "cannot connect to the daemon at {}: {e} (is ibacm running? see --socket)",
            socket.display()
        )
    })?;
    sock.set_read_timeout(Some(TIMEOUT))
        .and_then(|()| sock.set_write_timeout(Some(TIMEOUT)))
        .map_err(|e| format!("socket: {e}"))?;
    let rows = collect(&mut sock)?;
    if rows.is_empty() {
        return Err("the daemon has no endpoints (no ACTIVE port with an address)".into());
    }
    Ok(rows)
}

/// The provider's metrics, warnings on stderr.
fn provider_metrics(args: &Args) -> (Vec<ibacm_urdma::metrics::Family>, Option<f64>) {
    let path = crate::report::metrics_path(args.metrics.as_deref(), &args.opts);
    match path.as_deref().map(crate::report::read_metrics) {
        Some(Ok((families, age))) => {
            if age > crate::report::STALE_SECONDS {
                eprintln!(
                    "urdma-acm: the metrics are {age:.0} s old: the provider stopped renewing them"
                );
            }
            (families, Some(age))
        }
        Some(Err(e)) => {
            eprintln!("urdma-acm: {e}");
            (Vec::new(), None)
        }
        None => {
            eprintln!("urdma-acm: urdma_metrics_file is none: no provider metrics");
            (Vec::new(), None)
        }
    }
}

/// Writes `text` to `path` atomically: beside it, then renamed over it.
pub fn write_atomically(path: &std::path::Path, text: &str) -> Result<(), String> {
    let mut tmp = path.to_path_buf().into_os_string();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write {}: {e}", path.display())
    })
}

pub fn run(args: &Args) -> ExitCode {
    let rows = ask(&args.socket);
    let (out, ok) = match (&rows, args.prometheus, args.json) {
        (Err(e), false, true) => {
            // Tools get an object whatever happened: the provider's own
            // metrics may still say something.
            eprintln!("urdma-acm: {e}");
            let (families, age) = provider_metrics(args);
            (crate::report::json(&[], Some(e), &families, age), false)
        }
        (Err(e), _, _) => {
            eprintln!("urdma-acm: {e}");
            return ExitCode::FAILURE;
        }
        // The provider's own families are in its metrics file, which
        // node_exporter reads beside this output: repeating them here
        // would make the two collide.
        (Ok(rows), true, _) => (crate::report::prometheus(rows), true),
        (Ok(rows), false, true) => {
            let (families, age) = provider_metrics(args);
            (crate::report::json(rows, None, &families, age), true)
        }
        (Ok(rows), false, false) => {
            let (families, _) = provider_metrics(args);
            let mut text = table(rows);
            if !families.is_empty() {
                text.push('\n');
                text.push_str(&crate::report::lines(&families));
            }
            (text, true)
        }
    };
    let written = match &args.output {
        Some(path) => write_atomically(path, &out),
        None => std::io::stdout()
            .write_all(out.as_bytes())
            .map_err(|e| format!("stdout: {e}")),
    };
    match (written, ok) {
        (Ok(()), true) => ExitCode::SUCCESS,
        (Ok(()), false) => ExitCode::FAILURE,
        (Err(e), _) => {
            eprintln!("urdma-acm: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_decode_and_tabulate() {
        let ep = Endpoint {
            guid: 0x5054_00ff_fe12_3456,
            port: 1,
            pkey: 0xffff,
            provider: "urdma".into(),
            addresses: vec!["10.0.0.1".into(), "node1".into()],
        };
        let mut perf = vec![1, 0x82, 0, 7, 0, 0, 0, 72, 0, 0, 0, 0, 0, 0, 0, 0];
        for v in [0u64, 4, 0, 1, 0, 1, 3] {
            perf.extend_from_slice(&v.to_be_bytes());
        }
        let counters = parse_perf_reply(&MsgBuf::from_bytes(&perf), "10.0.0.1").unwrap();
        let t = table(&[(ep, Ok(counters))]);
        assert_eq!(
            t,
            "GUID                PORT  PKEY    PROVIDER  ADDRESS   ERROR  RESOLVE  NO_DATA  ADDR_QUERY  ADDR_CACHE  ROUTE_QUERY  ROUTE_CACHE\n\
             0x505400fffe123456  1     0xffff  urdma     10.0.0.1  0      4        0        1           0           1            3\n"
        );
        assert_eq!(
            parse_ep_reply(&[1, 0x83, 2, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap(),
            None,
            "EINVAL past the last endpoint"
        );
    }
}
