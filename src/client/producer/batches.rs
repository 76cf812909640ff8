//! The batches being filled for the partitions of one topic, numbered
//! for an idempotent producer.

use std::time::Instant;

use super::{check_record, BatchOptions, Headers, ParsedRecord, ProducerConfig, Sources};
use crate::error::Result;
use crate::storage::producers::{after, last_sequence};
use crate::storage::record::BatchBuilder;

/// The batches being filled for the partitions of one topic, and the rules
/// that both producers (to a broker, and embedded) follow: a record is
/// checked first; its partition's batch goes before it when the record
/// would make the batch larger than `bytes_max` or its timestamp does not
/// fit the batch; and the batch goes after it once it holds `records_max`.
#[derive(Debug)]
pub struct Batches {
    topic: String,
    builders: Vec<BatchBuilder>,
    /// When each partition's batch got its first record.
    opened: Vec<Option<Instant>>,
    /// The earliest of `opened`.
    oldest: Option<Instant>,
    options: BatchOptions,
    record_bytes_max: u32,
    /// An idempotent producer's id and epoch ([`Batches::number`]).
    producer: Option<(i64, i16)>,
    /// Each partition's next sequence number.
    sequences: Vec<i32>,
    /// The batches belong to transactions ([`Batches::number_transactional`]).
    transactional: bool,
    /// Each partition's batches finished so far.
    finished: Vec<u64>,
    /// The sources of each partition's records, in their batch's order,
    /// when kept ([`Batches::keep_sources`]).
    sources: Option<Vec<Sources>>,
}

/// A record checked for its partition's batch (see [`Batches::admit`]).
#[derive(Debug)]
pub struct Admitted<'a, 'h> {
    headers: Headers<'a, 'h>,
    timestamp: i64,
    /// The partition's batch must go before this record can join it.
    pub ship_first: bool,
}

impl Batches {
    /// Empty batches for `partitions` partitions of `topic`.
    pub fn new(
        topic: &str,
        partitions: u32,
        options: BatchOptions,
        record_bytes_max: u32,
    ) -> Batches {
        Batches {
            topic: topic.to_string(),
            builders: vec![
                BatchBuilder::compressed(options.codec, options.level);
                partitions as usize
            ],
            opened: vec![None; partitions as usize],
            oldest: None,
            options,
            record_bytes_max,
            producer: None,
            sequences: vec![0; partitions as usize],
            transactional: false,
            finished: vec![0; partitions as usize],
            sources: None,
        }
    }

    /// Empty batches for `partitions` partitions of `topic`, as `config`
    /// asks: keeping each record's source when acknowledged records are
    /// reported.
    pub(crate) fn for_producer(topic: &str, partitions: u32, config: &ProducerConfig) -> Batches {
        let mut batches = Batches::new(topic, partitions, config.batch, config.record_bytes_max);
        // A transaction commits its records' source offsets.
        if config.report.is_some() || config.transactional_id.is_some() {
            batches.keep_sources();
        }
        batches
    }

    /// Keeps the source of every record from now on, for
    /// [`Batches::take_sources`] (a report of acknowledged records echoes
    /// them).
    pub fn keep_sources(&mut self) {
        self.sources = Some(vec![Vec::new(); self.builders.len()]);
    }

    /// The sources of the records of `partition`'s batch, in their order,
    /// taken for the batch about to be sent (empty when none are kept).
    pub fn take_sources(&mut self, partition: u32) -> Sources {
        match &mut self.sources {
            Some(sources) => std::mem::take(&mut sources[partition as usize]),
            None => Sources::new(),
        }
    }

    /// Numbers the batches from now on as producer `id`'s, in `epoch`:
    /// each partition's from sequence 0 (an idempotent producer: a
    /// partition stores a batch sent again once, and refuses one that
    /// does not follow the last).
    pub fn number(&mut self, id: i64, epoch: i16) {
        self.producer = Some((id, epoch));
        self.sequences.iter_mut().for_each(|s| *s = 0);
    }

    /// [`Batches::number`], the batches marked as a transaction's (Kafka's
    /// attribute bit): a transactional producer's.
    pub fn number_transactional(&mut self, id: i64, epoch: i16) {
        self.number(id, epoch);
        self.transactional = true;
    }

    /// Finishes the batch of `partition` to be sent (numbered, for an
    /// idempotent producer: its sequence moves on by its records).
    pub fn finish(&mut self, partition: u32) -> &mut [u8] {
        let p = partition as usize;
        self.finished[p] += 1;
        let builder = &mut self.builders[p];
        match self.producer {
            None => builder.finish(),
            Some((id, epoch)) => {
                let first = self.sequences[p];
                // Wrapping from i32::MAX to 0, as the partition counts.
                self.sequences[p] = after(last_sequence(first, builder.len()));
                let batch = builder.finish_numbered((id, epoch, first));
                if self.transactional {
                    crate::storage::record::set_transactional(batch);
                }
                batch
            }
        }
    }

    /// The ordinal of the next batch of `partition` to be finished (0 for
    /// its first): a producer keeps its batches in this order.
    pub fn ordinal(&self, partition: u32) -> u64 {
        self.finished[partition as usize]
    }

    /// Whether the batches are numbered ([`Batches::number`]).
    pub fn numbered(&self) -> bool {
        self.producer.is_some()
    }

    /// The topic's partition count.
    pub fn partitions(&self) -> u32 {
        self.builders.len() as u32
    }

    /// Records in batches not yet sent.
    pub fn records(&self) -> u64 {
        self.builders.iter().map(|b| u64::from(b.len())).sum()
    }

    /// Checks `record` for `partition` (its timestamp, else `now`), and says
    /// whether the partition's batch must go first.
    pub fn admit<'a, 'h>(
        &self,
        partition: u32,
        record: &'a ParsedRecord,
        fixed_headers: &'h [(&'a [u8], &'a [u8])],
        now: i64,
    ) -> Result<Admitted<'a, 'h>> {
        let (headers, size) = check_record(
            &self.topic,
            partition,
            self.partitions(),
            record,
            fixed_headers,
            self.record_bytes_max,
        )?;
        let timestamp = record.timestamp.unwrap_or(now);
        let builder = &self.builders[partition as usize];
        let full = builder.size_bytes() + size > self.options.bytes_max;
        let ship_first = !builder.is_empty() && (full || !builder.accepts_timestamp(timestamp));
        Ok(Admitted {
            headers,
            timestamp,
            ship_first,
        })
    }

    /// Adds an admitted record (after its batch went, if it had to); true
    /// when the batch is now full and must go. Inlined, so that the
    /// admitted record stays in registers on the hot path.
    #[inline]
    pub fn push(
        &mut self,
        partition: u32,
        record: &ParsedRecord,
        admitted: &Admitted<'_, '_>,
    ) -> bool {
        if self.builders[partition as usize].is_empty() {
            self.open(partition);
        }
        let builder = &mut self.builders[partition as usize];
        let value = (!record.null_value).then_some(record.value.as_slice());
        builder.push_nullable(
            admitted.timestamp,
            record.key.as_deref(),
            &admitted.headers,
            value,
        );
        let full = builder.len() >= self.options.records_max;
        if let Some(sources) = &mut self.sources {
            sources[partition as usize].push(record.source.clone());
        }
        full
    }

    /// The batch being filled for `partition` (emptied by [`Batches::clear`]).
    pub fn batch(&mut self, partition: u32) -> &mut BatchBuilder {
        &mut self.builders[partition as usize]
    }

    /// Notes that the batch of `partition` gets its first record: one
    /// clock read per batch, not per record, out of the record's way.
    #[cold]
    fn open(&mut self, partition: u32) {
        let now = Instant::now();
        self.opened[partition as usize] = Some(now);
        self.oldest.get_or_insert(now);
    }

    /// When the batch of `partition` got its first record (`None` while
    /// it is empty).
    pub fn opened(&self, partition: u32) -> Option<Instant> {
        self.opened[partition as usize]
    }

    /// When the oldest batch not yet sent got its first record.
    pub fn oldest(&self) -> Option<Instant> {
        self.oldest
    }

    /// Empties the batch of `partition` (it was sent).
    pub fn clear(&mut self, partition: u32) {
        self.builders[partition as usize].clear();
        if let Some(sources) = &mut self.sources {
            sources[partition as usize].clear();
        }
        let opened = self.opened[partition as usize].take();
        if opened.is_some() && opened == self.oldest {
            // Once per batch sent, and only when it was the oldest.
            self.oldest = self.opened.iter().flatten().min().copied();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::record::{BatchHeader, Codec, Format};

    fn batches(partitions: u32) -> Batches {
        let options = BatchOptions {
            records_max: 1000,
            bytes_max: 1 << 20,
            codec: Codec::None,
            level: None,
        };
        Batches::new("t", partitions, options, 1 << 20)
    }

    /// Pushes `n` records to `partition`'s batch and finishes it: its
    /// (producer id, epoch, base sequence), and the ordinal it had.
    fn ship(b: &mut Batches, partition: u32, n: u32) -> ((i64, i16, i32), u64) {
        let record = ParsedRecord {
            value: b"v".to_vec(),
            ..ParsedRecord::default()
        };
        for _ in 0..n {
            let admitted = b.admit(partition, &record, &[], 1).unwrap();
            b.push(partition, &record, &admitted);
        }
        let ordinal = b.ordinal(partition);
        let batch = b.finish(partition).to_vec();
        b.clear(partition);
        let h = BatchHeader::decode(Format::Kafka, &batch, u32::MAX).unwrap();
        let numbers = (h.producer_id, h.producer_epoch, h.base_sequence);
        (numbers, ordinal)
    }

    /// Numbered, each partition's sequence follows its own records, and
    /// wraps from i32::MAX to 0 as Kafka's does; unnumbered, a batch
    /// carries none. Ordinals count each partition's batches either way.
    #[test]
    fn each_partitions_batches_are_numbered_by_their_records() {
        let mut b = batches(2);
        assert_eq!(ship(&mut b, 0, 3), ((-1, -1, -1), 0));
        assert!(!b.numbered());
        b.number(77, 4);
        assert!(b.numbered());
        assert_eq!(ship(&mut b, 0, 3), ((77, 4, 0), 1));
        assert_eq!(ship(&mut b, 1, 2), ((77, 4, 0), 0));
        assert_eq!(ship(&mut b, 0, 1), ((77, 4, 3), 2));
        assert_eq!(ship(&mut b, 1, 5), ((77, 4, 2), 1));
        b.sequences[0] = i32::MAX - 1;
        assert_eq!(ship(&mut b, 0, 3), ((77, 4, i32::MAX - 1), 3));
        assert_eq!(ship(&mut b, 0, 1), ((77, 4, 1), 4), "wrapped");
    }

    /// Kept, each batch's sources are its records', in their order, and
    /// go with it; not kept, none are.
    #[test]
    fn each_batch_takes_its_own_records_sources() {
        let mut b = batches(2);
        let record = |offset| ParsedRecord {
            value: b"v".to_vec(),
            source: Some(crate::client::Source {
                topic: "s".into(),
                partition: 1,
                offset,
            }),
            ..ParsedRecord::default()
        };
        let push = |b: &mut Batches, partition, r: &ParsedRecord| {
            let admitted = b.admit(partition, r, &[], 1).unwrap();
            b.push(partition, r, &admitted);
        };
        push(&mut b, 0, &record(1));
        assert!(b.take_sources(0).is_empty(), "not kept");
        b.keep_sources();
        push(&mut b, 0, &record(2));
        push(&mut b, 1, &record(3));
        push(&mut b, 0, &ParsedRecord::default());
        let offsets = |s: super::Sources| -> Vec<Option<u64>> {
            s.iter().map(|s| s.as_ref().map(|s| s.offset)).collect()
        };
        assert_eq!(offsets(b.take_sources(0)), vec![Some(2), None]);
        assert_eq!(offsets(b.take_sources(0)), vec![], "taken");
        b.clear(1);
        assert_eq!(offsets(b.take_sources(1)), vec![], "cleared with its batch");
    }
}
