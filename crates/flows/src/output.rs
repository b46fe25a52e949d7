//! Writing flow records: Parquet (the format the analysis reads) and NDJSON (for eyes and
//! `jq`). Both carry the schema name, its version and the effective configuration: Parquet in
//! the file's key-value metadata under `protolab.flows`, NDJSON as its first line.

use std::io::Write;
use std::sync::Arc;

use parquet::basic::Compression;
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int32Type, Int64Type};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use parquet::schema::types::ColumnPath;

use crate::error::Result;
use crate::record::{FlowRecord, SCHEMA};

/// Parquet schema: the columns of src/protolab/traffic/schema.py in its order and types
/// (VARCHAR = UTF8 byte array, INTEGER = INT32, BIGINT = INT64), then this source's extras.
const MESSAGE: &str = "
message protolab_flows {
  REQUIRED BYTE_ARRAY source (UTF8);
  REQUIRED BYTE_ARRAY transport (UTF8);
  REQUIRED BYTE_ARRAY client_ip (UTF8);
  REQUIRED INT32 client_port;
  REQUIRED BYTE_ARRAY server_ip (UTF8);
  REQUIRED INT32 server_port;
  REQUIRED INT64 first_ns;
  REQUIRED INT64 last_ns;
  REQUIRED DOUBLE duration_s;
  REQUIRED INT64 c2s_packets;
  REQUIRED INT64 s2c_packets;
  OPTIONAL INT64 c2s_bytes;
  OPTIONAL INT64 s2c_bytes;
  REQUIRED INT64 c2s_payload_bytes;
  REQUIRED INT64 s2c_payload_bytes;
  OPTIONAL INT64 c2s_retrans_bytes;
  OPTIONAL INT64 s2c_retrans_bytes;
  REQUIRED INT32 syn;
  REQUIRED INT32 fin;
  REQUIRED INT32 rst;
  REQUIRED BOOLEAN ack;
  OPTIONAL BYTE_ARRAY sni (UTF8);
  OPTIONAL BYTE_ARRAY alpn_offer (UTF8);
  OPTIONAL BYTE_ARRAY alpn_server (UTF8);
  OPTIONAL BYTE_ARRAY alpn_source (UTF8);
  OPTIONAL BYTE_ARRAY tls_version (UTF8);
  OPTIONAL BYTE_ARRAY quic_version (UTF8);
  OPTIONAL BYTE_ARRAY http_host (UTF8);
  REQUIRED BYTE_ARRAY protocol (UTF8);
  OPTIONAL INT32 c2s_tcp_flags;
  OPTIONAL INT32 s2c_tcp_flags;
  OPTIONAL BYTE_ARRAY http_method (UTF8);
  OPTIONAL BYTE_ARRAY http_path (UTF8);
  OPTIONAL INT32 c2s_ttl;
  OPTIONAL INT32 syn_window;
  OPTIONAL INT32 syn_wscale;
  OPTIONAL INT32 syn_mss;
  OPTIONAL INT64 syn_tsval;
  OPTIONAL BYTE_ARRAY syn_options (UTF8);
}";

/// Column names in order (the Parquet schema's, and NDJSON's keys).
pub const COLUMNS: [&str; 39] = [
    "source",
    "transport",
    "client_ip",
    "client_port",
    "server_ip",
    "server_port",
    "first_ns",
    "last_ns",
    "duration_s",
    "c2s_packets",
    "s2c_packets",
    "c2s_bytes",
    "s2c_bytes",
    "c2s_payload_bytes",
    "s2c_payload_bytes",
    "c2s_retrans_bytes",
    "s2c_retrans_bytes",
    "syn",
    "fin",
    "rst",
    "ack",
    "sni",
    "alpn_offer",
    "alpn_server",
    "alpn_source",
    "tls_version",
    "quic_version",
    "http_host",
    "protocol",
    "c2s_tcp_flags",
    "s2c_tcp_flags",
    "http_method",
    "http_path",
    "c2s_ttl",
    "syn_window",
    "syn_wscale",
    "syn_mss",
    "syn_tsval",
    "syn_options",
];

/// Columns with few distinct values.
const DICTIONARY_COLUMNS: [&str; 13] = [
    "source",
    "transport",
    "server_ip",
    "sni",
    "alpn_offer",
    "alpn_server",
    "alpn_source",
    "tls_version",
    "quic_version",
    "http_host",
    "protocol",
    "http_method",
    "syn_options",
];

/// Strings handed to the Parquet writer at a time.
const STRING_BATCH: usize = 4096;

/// Rows per row group: bounds the writer's memory on captures with millions of flows.
const ROW_GROUP: usize = 256 * 1024;

/// Writes `flows` as Parquet; `metadata` (a JSON object: schema, version, configuration) goes
/// into the key-value metadata under the schema's name.
pub fn write_parquet<W: Write + Send>(out: W, flows: &[FlowRecord], metadata: &serde_json::Value) -> Result<()> {
    let schema = Arc::new(parse_message_type(MESSAGE)?);
    let mut props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        // Dictionaries only where values repeat: elsewhere they cost time and save nothing.
        .set_dictionary_enabled(false)
        // Column-chunk statistics (what readers prune row groups with); page-level ones and
        // their index cost time on every value and bring nothing for files read whole.
        .set_statistics_enabled(EnabledStatistics::Chunk);
    for column in DICTIONARY_COLUMNS {
        props = props.set_column_dictionary_enabled(ColumnPath::from(column), true);
    }
    let props = props
        .set_created_by(format!("protolab-flows {}", env!("CARGO_PKG_VERSION")))
        .set_key_value_metadata(Some(vec![KeyValue::new(SCHEMA.to_string(), metadata.to_string())]))
        .build();
    let mut writer = SerializedFileWriter::new(out, schema, Arc::new(props))?;
    for group in flows.chunks(ROW_GROUP) {
        // One pass over the records gathers every column (33 passes over records of a few
        // hundred bytes each would cost more than the rest of the writing).
        let mut columns = Columns::new(group.len());
        for r in group {
            columns.push(r);
        }
        let mut rg = writer.next_row_group()?;
        let mut data = columns.cols.into_iter();
        while let Some(mut column) = rg.next_column()? {
            let Some(col) = data.next() else {
                return Err(parquet::errors::ParquetError::General("more columns in the schema than gathered".into()).into());
            };
            col.write(&mut column)?;
            column.close()?;
        }
        rg.close()?;
    }
    writer.close()?;
    Ok(())
}

/// Values of one column and, for a nullable one, its definition levels (1 = present).
enum Col {
    I32(Vec<i32>, Option<Vec<i16>>),
    I64(Vec<i64>, Option<Vec<i16>>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
    /// Strings concatenated in `text`; `spans` are (offset, length).
    Str { text: Vec<u8>, spans: Vec<(usize, u32)>, defs: Option<Vec<i16>> },
}

fn levels(nullable: bool, n: usize) -> Option<Vec<i16>> {
    nullable.then(|| Vec::with_capacity(n))
}

impl Col {
    fn i32(nullable: bool, n: usize) -> Col {
        Col::I32(Vec::with_capacity(n), levels(nullable, n))
    }
    fn i64(nullable: bool, n: usize) -> Col {
        Col::I64(Vec::with_capacity(n), levels(nullable, n))
    }
    fn str(nullable: bool, n: usize) -> Col {
        Col::Str { text: Vec::with_capacity(n * 8), spans: Vec::with_capacity(n), defs: levels(nullable, n) }
    }

    fn write(self, column: &mut parquet::file::writer::SerializedColumnWriter<'_>) -> Result<()> {
        match self {
            Col::I32(v, d) => {
                column.typed::<Int32Type>().write_batch(&v, d.as_deref(), None)?;
            }
            Col::I64(v, d) => {
                column.typed::<Int64Type>().write_batch(&v, d.as_deref(), None)?;
            }
            Col::F64(v) => {
                column.typed::<DoubleType>().write_batch(&v, None, None)?;
            }
            Col::Bool(v) => {
                column.typed::<BoolType>().write_batch(&v, None, None)?;
            }
            Col::Str { text, spans, defs } => {
                // Every value is a slice of one shared buffer, handed over a few thousand at a
                // time (a vector of them all would be 32 bytes per row and column).
                let all = ByteArray::from(text);
                let writer = column.typed::<ByteArrayType>();
                let mut values = Vec::with_capacity(STRING_BATCH);
                let mut next = 0;
                let rows = defs.as_ref().map_or(spans.len(), Vec::len);
                for start in (0..rows).step_by(STRING_BATCH) {
                    let end = (start + STRING_BATCH).min(rows);
                    let levels = defs.as_ref().map(|d| &d[start..end]);
                    let present = levels.map_or(end - start, |l| l.iter().filter(|&&d| d == 1).count());
                    values.clear();
                    values.extend(spans[next..next + present].iter().map(|&(at, len)| all.slice(at, len as usize)));
                    next += present;
                    writer.write_batch(&values, levels, None)?;
                }
            }
        }
        Ok(())
    }
}

/// Column builders in schema order.
struct Columns {
    cols: Vec<Col>,
}

impl Columns {
    fn new(n: usize) -> Columns {
        use Col as C;
        let (req, opt) = (false, true);
        let cols = vec![
            C::str(req, n),       // source
            C::str(req, n),       // transport
            C::str(req, n),       // client_ip
            C::i32(req, n),       // client_port
            C::str(req, n),       // server_ip
            C::i32(req, n),       // server_port
            C::i64(req, n),       // first_ns
            C::i64(req, n),       // last_ns
            C::F64(Vec::with_capacity(n)), // duration_s
            C::i64(req, n),       // c2s_packets
            C::i64(req, n),       // s2c_packets
            C::i64(opt, n),       // c2s_bytes
            C::i64(opt, n),       // s2c_bytes
            C::i64(req, n),       // c2s_payload_bytes
            C::i64(req, n),       // s2c_payload_bytes
            C::i64(opt, n),       // c2s_retrans_bytes
            C::i64(opt, n),       // s2c_retrans_bytes
            C::i32(req, n),       // syn
            C::i32(req, n),       // fin
            C::i32(req, n),       // rst
            C::Bool(Vec::with_capacity(n)), // ack
            C::str(opt, n),       // sni
            C::str(opt, n),       // alpn_offer
            C::str(opt, n),       // alpn_server
            C::str(opt, n),       // alpn_source
            C::str(opt, n),       // tls_version
            C::str(opt, n),       // quic_version
            C::str(opt, n),       // http_host
            C::str(req, n),       // protocol
            C::i32(opt, n),       // c2s_tcp_flags
            C::i32(opt, n),       // s2c_tcp_flags
            C::str(opt, n),       // http_method
            C::str(opt, n),       // http_path
            C::i32(opt, n),       // c2s_ttl
            C::i32(opt, n),       // syn_window
            C::i32(opt, n),       // syn_wscale
            C::i32(opt, n),       // syn_mss
            C::i64(opt, n),       // syn_tsval
            C::str(opt, n),       // syn_options
        ];
        debug_assert_eq!(cols.len(), COLUMNS.len());
        Columns { cols }
    }

    /// Appends one record, field by field in schema order.
    fn push(&mut self, r: &FlowRecord) {
        // Counters are u64 in memory and BIGINT in the schema; no capture gets near 2^63.
        let mut at = 0;
        let mut next = || {
            at += 1;
            at - 1
        };
        let cols = &mut self.cols;
        put_str(&mut cols[next()], Some(r.source));
        put_str(&mut cols[next()], Some(r.transport));
        put_ip(&mut cols[next()], r.client_ip);
        put_i32(&mut cols[next()], Some(i32::from(r.client_port)));
        put_ip(&mut cols[next()], r.server_ip);
        put_i32(&mut cols[next()], Some(i32::from(r.server_port)));
        put_i64(&mut cols[next()], Some(r.first_ns));
        put_i64(&mut cols[next()], Some(r.last_ns));
        if let Col::F64(v) = &mut cols[next()] {
            v.push(r.duration_s);
        }
        put_i64(&mut cols[next()], Some(r.c2s_packets as i64));
        put_i64(&mut cols[next()], Some(r.s2c_packets as i64));
        put_i64(&mut cols[next()], Some(r.c2s_bytes as i64));
        put_i64(&mut cols[next()], Some(r.s2c_bytes as i64));
        put_i64(&mut cols[next()], Some(r.c2s_payload_bytes as i64));
        put_i64(&mut cols[next()], Some(r.s2c_payload_bytes as i64));
        put_i64(&mut cols[next()], r.c2s_retrans_bytes.map(|v| v as i64));
        put_i64(&mut cols[next()], r.s2c_retrans_bytes.map(|v| v as i64));
        put_i32(&mut cols[next()], Some(r.syn as i32));
        put_i32(&mut cols[next()], Some(r.fin as i32));
        put_i32(&mut cols[next()], Some(r.rst as i32));
        if let Col::Bool(v) = &mut cols[next()] {
            v.push(r.ack);
        }
        put_str(&mut cols[next()], r.sni.as_deref());
        put_str(&mut cols[next()], r.alpn_offer.as_deref());
        put_str(&mut cols[next()], r.alpn_server.as_deref());
        put_str(&mut cols[next()], r.alpn_source);
        put_str(&mut cols[next()], r.tls_version.as_deref());
        put_str(&mut cols[next()], r.quic_version.as_deref());
        put_str(&mut cols[next()], r.http_host.as_deref());
        put_str(&mut cols[next()], Some(r.protocol));
        put_i32(&mut cols[next()], r.c2s_tcp_flags.map(i32::from));
        put_i32(&mut cols[next()], r.s2c_tcp_flags.map(i32::from));
        put_str(&mut cols[next()], r.http_method.as_deref());
        put_str(&mut cols[next()], r.http_path.as_deref());
        put_i32(&mut cols[next()], r.c2s_ttl.map(i32::from));
        put_i32(&mut cols[next()], r.syn_window.map(i32::from));
        put_i32(&mut cols[next()], r.syn_wscale.map(i32::from));
        put_i32(&mut cols[next()], r.syn_mss.map(i32::from));
        put_i64(&mut cols[next()], r.syn_tsval.map(i64::from));
        put_str(&mut cols[next()], r.syn_options.as_deref());
    }
}

/// A string's place in its column's buffer; strings come from hellos and request lines, which
/// are read only when under 64 KiB.
fn span(at: usize, len: usize) -> (usize, u32) {
    (at, u32::try_from(len).unwrap_or(u32::MAX))
}

fn put_level(defs: &mut Option<Vec<i16>>, present: bool) {
    if let Some(d) = defs {
        d.push(i16::from(present));
    }
}

fn put_i32(col: &mut Col, v: Option<i32>) {
    if let Col::I32(values, defs) = col {
        put_level(defs, v.is_some());
        values.extend(v);
    }
}

fn put_i64(col: &mut Col, v: Option<i64>) {
    if let Col::I64(values, defs) = col {
        put_level(defs, v.is_some());
        values.extend(v);
    }
}

fn put_str(col: &mut Col, v: Option<&str>) {
    if let Col::Str { text, spans, defs } = col {
        put_level(defs, v.is_some());
        if let Some(s) = v {
            spans.push(span(text.len(), s.len()));
            text.extend_from_slice(s.as_bytes());
        }
    }
}

fn put_ip(col: &mut Col, ip: std::net::IpAddr) {
    use std::io::Write as _;
    if let Col::Str { text, spans, .. } = col {
        let at = text.len();
        // Writing to a Vec cannot fail.
        let _ = write!(text, "{ip}");
        spans.push(span(at, text.len() - at));
    }
}

/// Writes `flows` as NDJSON: first `metadata` (a JSON object with the schema, its version and
/// the configuration), then one object per flow with the Parquet columns as keys.
pub fn write_ndjson<W: Write>(mut out: W, flows: &[FlowRecord], metadata: &serde_json::Value) -> Result<()> {
    let io = |e| crate::error::Error::Io { context: "cannot write NDJSON".into(), error: e };
    serde_json::to_writer(&mut out, metadata)?;
    out.write_all(b"\n").map_err(io)?;
    for r in flows {
        serde_json::to_writer(&mut out, r)?;
        out.write_all(b"\n").map_err(io)?;
    }
    out.flush().map_err(io)?;
    Ok(())
}
