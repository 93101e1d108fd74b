//! Reading the trace: the JSON is streamed, one event at a time, into typed structs that skip every field perfcast
//! does not use, and each event is handed to the [`Collector`].

use std::cell::Cell;
use std::fmt;
use std::io::{self, Read};
use std::rc::Rc;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use super::collector::Collector;
use super::MAX_TRACE_BYTES;

/// Counts newlines (for line numbers of rejected events) and bounds the bytes read.
pub(super) struct Counting<R> {
    pub(super) inner: R,
    pub(super) newlines: Rc<Cell<u64>>,
    pub(super) read: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read = self.read.saturating_add(n as u64);
        if self.read > MAX_TRACE_BYTES {
            return Err(io::Error::other(format!("the trace exceeds {MAX_TRACE_BYTES} bytes")));
        }
        let nl = buf.get(..n).unwrap_or(&[]).iter().filter(|&&b| b == b'\n').count() as u64;
        self.newlines.set(self.newlines.get().saturating_add(nl));
        Ok(n)
    }
}

#[derive(Deserialize)]
pub(super) struct RawEvent {
    #[serde(default)]
    pub(super) ph: Option<Value>,
    #[serde(default)]
    pub(super) cat: Option<Value>,
    #[serde(default)]
    pub(super) name: Option<Value>,
    #[serde(default)]
    pub(super) pid: Option<Value>,
    #[serde(default)]
    pub(super) tid: Option<Value>,
    #[serde(default)]
    pub(super) ts: Option<Value>,
    #[serde(default)]
    pub(super) dur: Option<Value>,
    #[serde(default)]
    pub(super) args: Option<RawArgs>,
}

#[derive(Deserialize, Default)]
pub(super) struct RawArgs {
    #[serde(rename = "External id", default)]
    pub(super) external_id: Option<Value>,
    #[serde(default)]
    pub(super) correlation: Option<Value>,
    #[serde(default)]
    pub(super) device: Option<Value>,
    #[serde(default)]
    pub(super) grid: Option<Value>,
    #[serde(default)]
    pub(super) block: Option<Value>,
    #[serde(rename = "registers per thread", default)]
    pub(super) registers: Option<Value>,
    #[serde(rename = "shared memory", default)]
    pub(super) shared_memory: Option<Value>,
    #[serde(rename = "est. achieved occupancy %", default)]
    pub(super) occupancy: Option<Value>,
    #[serde(rename = "Input Dims", default)]
    pub(super) input_dims: Option<Value>,
    #[serde(rename = "Input type", default)]
    pub(super) input_type: Option<Value>,
    #[serde(rename = "Concrete Inputs", default)]
    pub(super) concrete: Option<Value>,
    #[serde(rename = "Sequence number", default)]
    pub(super) seq: Option<Value>,
    #[serde(rename = "Collective name", default)]
    pub(super) collective: Option<Value>,
    #[serde(rename = "In msg nelems", default)]
    pub(super) in_nelems: Option<Value>,
    #[serde(rename = "Out msg nelems", default)]
    pub(super) out_nelems: Option<Value>,
    #[serde(rename = "Group size", default)]
    pub(super) group_size: Option<Value>,
    #[serde(default)]
    pub(super) dtype: Option<Value>,
}

pub(super) struct TraceSeed<'a> {
    pub(super) sink: &'a mut Collector,
}

impl<'de> DeserializeSeed<'de> for TraceSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TraceSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Chrome trace: an object with traceEvents, or an array of events")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "traceEvents" => map.next_value_seed(EventsSeed { sink: &mut *self.sink })?,
                "deviceProperties" => self.sink.devices(map.next_value::<Value>()?),
                "distributedInfo" => self.sink.distributed(map.next_value::<Value>()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        EventsSeed { sink: self.sink }.visit_seq(seq)
    }
}

struct EventsSeed<'a> {
    sink: &'a mut Collector,
}

impl<'de> DeserializeSeed<'de> for EventsSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EventsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of trace events")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.sink.saw_events = true;
        while let Some(ev) = seq.next_element::<RawEvent>()? {
            self.sink.push(ev).map_err(de::Error::custom)?;
        }
        Ok(())
    }
}
