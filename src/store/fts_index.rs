//! FTS5's on-disk index of `search_fts`, read without FTS5: the structure record, the leaf
//! pages of each segment, a term's doclist with its positions, and the tombstones of deleted
//! rows. The format is FTS5's persistent one, described in SQLite's `fts5_index.c`
//! ("Details"); SQLite keeps it readable across versions.
//!
//! A search of single words joined by AND, of a common word or of a phrase reads their
//! doclists here (`store::search`; forward, or newest first with [`Newest`]): one `%_data`
//! read per leaf page and a few instructions per entry, where FTS5's expression engine spends
//! hundreds per entry of the longer list, and needs its own counting and vocabulary passes
//! besides. The reader gives up (`Ok(None)`) on anything it
//! does not expect — a delete marker of the legacy format, a docid in two segments, a record
//! that does not parse — and the search then runs through FTS5 instead.
//!
//! Reads go through the caller's connection, inside its read transaction: the structure and
//! every page come from one snapshot.

use rusqlite::Connection;

use crate::store::{StoreError, sql};

type Result<T> = std::result::Result<T, StoreError>;

/// `%_data` id of the structure record.
const STRUCTURE_ID: i64 = 10;

/// Every term of the main index starts with this byte (prefix indexes use others).
const MAIN_PREFIX: u8 = b'0';

/// Bits of a `%_data` id below the segment id: page number (31), doclist-index height (5),
/// doclist-index flag (1).
const SEGMENT_SHIFT: u32 = 31 + 5 + 1;

/// The `%_data` id of a leaf page.
fn leaf_id(segment: u64, page: u64) -> i64 {
    ((segment << SEGMENT_SHIFT) + page) as i64
}

/// The `%_data` id of a tombstone hash page.
fn tombstone_id(segment: u64, page: u64) -> i64 {
    leaf_id(segment + (1 << 16), page)
}

/// Reads one SQLite varint (big-endian groups of 7 bits, the ninth byte whole).
pub(crate) fn read_varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut value: u64 = 0;
    for idx in 0..9 {
        let (&byte, rest) = bytes.split_first()?;
        *bytes = rest;
        if idx == 8 {
            return Some((value << 8) | u64::from(byte));
        }
        value = (value << 7) | u64::from(byte & 0x7F);
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// Reads a varint at `*offset` of `page`, moving the offset past it (the per-entry work of a
/// doclist: kept to indexing, without slices or options per byte).
#[inline(always)]
fn varint_at(page: &[u8], offset: &mut usize) -> Option<u64> {
    let mut at = *offset;
    let mut value: u64 = 0;
    for _ in 0..8 {
        let byte = *page.get(at)?;
        at += 1;
        value = (value << 7) | u64::from(byte & 0x7F);
        if byte < 0x80 {
            *offset = at;
            return Some(value);
        }
    }
    let byte = *page.get(at)?;
    *offset = at + 1;
    Some((value << 8) | u64::from(byte))
}

/// One segment of the index.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Segment {
    id: u64,
    first_page: u64,
    last_page: u64,
    tombstone_pages: u64,
}

/// Parses the structure record: a 4-byte cookie, the version-2 marker when present, then
/// varints: levels, segments, write counter, and per level the merge count, the segment count
/// and each segment's id, first and last leaf page (version 2 adds two origins, the tombstone
/// page count, and the tombstone and entry counts).
fn parse_structure(block: &[u8]) -> Option<Vec<Segment>> {
    let mut rest = block.get(4..)?;
    let v2 = match rest.strip_prefix(&[0xff, 0x00, 0x00, 0x01]) {
        Some(tail) => {
            rest = tail;
            true
        }
        None => false,
    };
    let levels = read_varint(&mut rest)?;
    let total = read_varint(&mut rest)?;
    let _write_counter = read_varint(&mut rest)?;
    if levels > 64 || total > 65_535 {
        return None;
    }
    let mut segments = Vec::with_capacity(total as usize);
    let mut listed = 0u64;
    for _ in 0..levels {
        let _merging = read_varint(&mut rest)?;
        let count = read_varint(&mut rest)?;
        for _ in 0..count {
            let id = read_varint(&mut rest)?;
            let first_page = read_varint(&mut rest)?;
            let last_page = read_varint(&mut rest)?;
            let mut tombstone_pages = 0;
            if v2 {
                let _origin_low = read_varint(&mut rest)?;
                let _origin_high = read_varint(&mut rest)?;
                tombstone_pages = read_varint(&mut rest)?;
                let _tombstones = read_varint(&mut rest)?;
                let _entries = read_varint(&mut rest)?;
            }
            listed += 1;
            // A merge in progress leaves an input segment it has used up listed with no
            // pages (0 and 0) until the merge ends.
            if first_page == 0 && last_page == 0 && id > 0 && id <= 0xFFFF {
                continue;
            }
            // Segment ids have 16 bits, page numbers 31 (`fts5_dri`).
            if id == 0
                || id > 0xFFFF
                || first_page == 0
                || last_page < first_page
                || last_page >= 1 << 31
                || tombstone_pages >= 1 << 31
            {
                return None;
            }
            segments.push(Segment {
                id,
                first_page,
                last_page,
                tombstone_pages,
            });
        }
    }
    (listed == total).then_some(segments)
}

/// A leaf page: `data[..leaf_end]` holds terms and doclists, `data[leaf_end..]` the footer
/// (one varint per term on the page: the first term's offset, then deltas).
struct Page {
    data: Vec<u8>,
    leaf_end: usize,
}

impl Page {
    fn new() -> Self {
        Self {
            data: Vec::with_capacity(4096),
            leaf_end: 0,
        }
    }

    /// Loads a leaf page; `false` when it is missing or too short to have its header.
    fn load(&mut self, conn: &Connection, path: &str, segment: u64, page: u64) -> Result<bool> {
        if !sql::fts_block(conn, path, leaf_id(segment, page), &mut self.data)? {
            return Ok(false);
        }
        let (Some(&high), Some(&low)) = (self.data.get(2), self.data.get(3)) else {
            return Ok(false);
        };
        self.leaf_end = usize::from(u16::from_be_bytes([high, low]));
        Ok(self.leaf_end >= 4 && self.leaf_end <= self.data.len())
    }

    /// The offset of the first rowid on the page when it comes before any term (else 0).
    fn first_rowid(&self) -> usize {
        usize::from(u16::from_be_bytes([self.data[0], self.data[1]]))
    }

    fn has_terms(&self) -> bool {
        self.data.len() > self.leaf_end
    }

    /// The offset of the first term on the page, when it has terms.
    fn first_term(&self) -> Option<usize> {
        let mut offset = self.leaf_end;
        varint_at(&self.data, &mut offset).map(|value| value as usize)
    }

    /// Finds `key` among the page's terms: `Some(None)` when it is not there, else where its
    /// doclist starts and where the next term starts (when on this page); `None` when the page
    /// does not parse.
    fn find_term(&self, key: &[u8]) -> Option<Option<(usize, Option<usize>)>> {
        let page = &self.data;
        let mut footer = page.get(self.leaf_end..)?;
        let mut term_at = usize::try_from(read_varint(&mut footer)?).ok()?;
        let mut term: Vec<u8> = Vec::with_capacity(key.len() + 8);
        let mut first = true;
        loop {
            let mut offset = term_at;
            // The first term on a page is whole; the others share a prefix with the previous.
            let shared = if first {
                0
            } else {
                varint_at(page, &mut offset)? as usize
            };
            let new = varint_at(page, &mut offset)? as usize;
            if shared > term.len() {
                return None;
            }
            term.truncate(shared);
            term.extend_from_slice(page.get(offset..offset.checked_add(new)?)?);
            let doclist = offset + new;
            let next = match footer.is_empty() {
                true => None,
                false => Some(term_at.checked_add(read_varint(&mut footer)? as usize)?),
            };
            match term.as_slice().cmp(key) {
                std::cmp::Ordering::Equal => return Some(Some((doclist, next))),
                std::cmp::Ordering::Greater => return Some(None),
                std::cmp::Ordering::Less => match next {
                    Some(next) if next > term_at && next < self.leaf_end => {
                        term_at = next;
                        first = false;
                    }
                    Some(_) => return None,
                    None => return Some(None),
                },
            }
        }
    }
}

/// Decodes a position list (a column's offsets as deltas + 2; `0x01` and a column number
/// switch columns) into FTS5's 64-bit positions (`column << 32 | offset`), one whole varint
/// at a time, so that a list split across pages decodes in parts.
#[derive(Default)]
struct PositionDecoder {
    at: i64,
    state: DecoderState,
}

#[derive(Default, Clone, Copy)]
enum DecoderState {
    #[default]
    Offset,
    Column,
    FirstInColumn,
}

impl PositionDecoder {
    /// Decodes `bytes` (whole varints), appending positions to `out`; `false` when a value is
    /// not one FTS5 writes.
    fn decode(&mut self, mut bytes: &[u8], out: &mut Vec<i64>) -> bool {
        const OFFSET_MASK: i64 = 0x7FFF_FFFF;
        while let Some((&byte, rest)) = bytes.split_first() {
            let value = if byte < 0x80 {
                bytes = rest;
                u64::from(byte)
            } else {
                match read_varint(&mut bytes) {
                    Some(value) => value,
                    None => return false,
                }
            };
            match self.state {
                DecoderState::Offset if value == 1 => self.state = DecoderState::Column,
                DecoderState::Offset if value >= 2 => {
                    let delta = (value - 2) as i64 & OFFSET_MASK;
                    self.at = (self.at & !OFFSET_MASK) + ((self.at + delta) & OFFSET_MASK);
                    out.push(self.at);
                }
                DecoderState::Offset => return false,
                DecoderState::Column => {
                    let Ok(column) = i64::try_from(value) else {
                        return false;
                    };
                    if column > i64::from(i32::MAX) {
                        return false;
                    }
                    self.at = column << 32;
                    self.state = DecoderState::FirstInColumn;
                }
                DecoderState::FirstInColumn => {
                    if value < 2 {
                        return false;
                    }
                    self.at += (value - 2) as i64 & OFFSET_MASK;
                    out.push(self.at);
                    self.state = DecoderState::Offset;
                }
            }
        }
        true
    }
}

/// One document of a term: its docid and its positions (`Postings::positions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Posting {
    docid: i64,
    start: u32,
    end: u32,
}

/// The documents of one term read from the index, by docid ascending, with their positions.
#[derive(Debug, Default)]
pub struct Postings {
    entries: Vec<Posting>,
    positions: Vec<i64>,
    docs: usize,
}

impl Postings {
    /// How many documents have the term in the whole index — at least `enough` when the read
    /// stopped early ([`Index::read`]).
    pub fn docs(&self) -> usize {
        self.docs
    }

    /// The docids kept, ascending.
    pub fn docids(&self) -> impl Iterator<Item = i64> + '_ {
        self.entries.iter().map(|entry| entry.docid)
    }

    /// The kept documents with the term's occurrence count in each, by docid ascending.
    pub fn frequencies(&self) -> Vec<(i64, u32)> {
        self.entries
            .iter()
            .map(|entry| (entry.docid, entry.end - entry.start))
            .collect()
    }

    /// The term's positions in `docid` (ascending; `column << 32 | offset`), when kept.
    pub fn positions(&self, docid: i64) -> Option<&[i64]> {
        let idx = self
            .entries
            .binary_search_by_key(&docid, |entry| entry.docid)
            .ok()?;
        let entry = self.entries[idx];
        self.positions.get(entry.start as usize..entry.end as usize)
    }
}

/// Where a term's doclist starts in each segment, and how many pages it spans at most.
#[derive(Debug)]
pub struct Term {
    key: Vec<u8>,
    start_pages: Vec<u64>,
    /// Per segment, the last page the doclist can reach: the next term's page (which may
    /// begin with the doclist's last entries), or the segment's last page.
    end_pages: Vec<u64>,
    pages: u64,
}

impl Term {
    /// The leaf pages the term's doclists span, over all segments (an upper bound: a segment
    /// that lacks the term counts the page it would be on).
    pub fn pages(&self) -> u64 {
        self.pages
    }
}

/// The tombstone hash of one segment, its pages read when first needed.
struct Tombstones {
    pages: Vec<Option<Vec<u8>>>,
}

impl Tombstones {
    fn new(count: u64) -> Self {
        Self {
            pages: (0..count).map(|_| None).collect(),
        }
    }

    /// Whether `docid` is deleted from the segment (FTS5's `fts5IndexTombstoneQuery`: slot
    /// `(rowid / pages) % slots` of page `rowid % pages`, probed linearly; keys big-endian, 4
    /// or 8 bytes; rowid 0 is a flag of the first page).
    fn contains(
        &mut self,
        conn: &Connection,
        path: &str,
        segment: u64,
        docid: i64,
    ) -> Result<bool> {
        let count = self.pages.len() as u64;
        if count == 0 {
            return Ok(false);
        }
        let rowid = docid as u64;
        let page_no = rowid % count;
        let slot_page = &mut self.pages[page_no as usize];
        if slot_page.is_none() {
            let mut block = Vec::new();
            if !sql::fts_block(conn, path, tombstone_id(segment, page_no), &mut block)? {
                // FTS5 treats a missing hash page as "no tombstone".
                block.clear();
            }
            *slot_page = Some(block);
        }
        let page = slot_page.as_deref().unwrap_or_default();
        if page.len() < 8 {
            return Ok(false);
        }
        if rowid == 0 {
            return Ok(page[1] != 0);
        }
        let key_size = if page[0] == 4 { 4 } else { 8 };
        let slots = if page.len() > 16 {
            (page.len() - 8) / key_size
        } else {
            1
        };
        let mut slot = ((rowid / count) % slots as u64) as usize;
        let mut collisions = slots;
        loop {
            let at = 8 + slot * key_size;
            let Some(bytes) = page.get(at..at + key_size) else {
                return Ok(false);
            };
            let key = bytes
                .iter()
                .fold(0u64, |key, &byte| (key << 8) | u64::from(byte));
            if key == 0 {
                return Ok(false);
            }
            if key == rowid {
                return Ok(true);
            }
            if collisions == 0 {
                return Ok(false);
            }
            collisions -= 1;
            slot = (slot + 1) % slots;
        }
    }
}

/// What one segment's read found, besides the postings it appended.
enum SegmentRead {
    Done,
    GiveUp,
}

/// The index's segments, from its structure record.
#[derive(Debug)]
pub struct Index {
    segments: Vec<Segment>,
}

impl Index {
    /// Reads the structure record; `None` when there is none or it does not parse.
    pub fn open(conn: &Connection, path: &str) -> Result<Option<Self>> {
        let mut block = Vec::new();
        if !sql::fts_block(conn, path, STRUCTURE_ID, &mut block)? {
            return Ok(None);
        }
        Ok(parse_structure(&block).map(|segments| Self { segments }))
    }

    /// The number of segments that hold pages (one after a merge).
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Finds where a token's doclist starts in each segment (FTS5's `%_idx` holds the first
    /// term of each leaf page that has terms) and bounds its length by where the next term's
    /// page starts.
    pub fn locate(&self, conn: &Connection, path: &str, token: &str) -> Result<Term> {
        let mut key = Vec::with_capacity(token.len() + 1);
        key.push(MAIN_PREFIX);
        key.extend_from_slice(token.as_bytes());
        let mut start_pages = Vec::with_capacity(self.segments.len());
        let mut end_pages = Vec::with_capacity(self.segments.len());
        let mut pages = 0u64;
        for segment in &self.segments {
            let start = sql::fts_term_page(conn, path, segment.id, &key)?
                .map_or(segment.first_page, |page| page.max(segment.first_page))
                .min(segment.last_page);
            let end = sql::fts_next_term_page(conn, path, segment.id, &key, start)?
                .map_or(segment.last_page, |page| page.min(segment.last_page))
                .max(start);
            pages += end - start + 1;
            start_pages.push(start);
            end_pages.push(end);
        }
        Ok(Term {
            key,
            start_pages,
            end_pages,
            pages,
        })
    }

    /// Reads a term's documents: all of them (`within: None`), or only those whose docid is
    /// in `within` (sorted) — every document is counted either way. With `within`, a segment's
    /// read stops past its last docid once `enough` documents have been counted (the count is
    /// then a lower bound). `None` when the index holds something this reader does not expect.
    pub fn read(
        &self,
        conn: &Connection,
        path: &str,
        term: &Term,
        within: Option<&[i64]>,
        enough: usize,
    ) -> Result<Option<Postings>> {
        let mut out = Postings::default();
        let mut page = Page::new();
        let mut segments_with_entries = 0;
        for (segment, &start) in self.segments.iter().zip(&term.start_pages) {
            let before = out.entries.len();
            match read_segment(
                conn, path, segment, start, &term.key, within, enough, &mut page, &mut out,
            )? {
                SegmentRead::Done => {}
                SegmentRead::GiveUp => return Ok(None),
            }
            if out.entries.len() > before {
                segments_with_entries += 1;
            }
        }
        if segments_with_entries > 1 {
            out.entries.sort_unstable_by_key(|entry| entry.docid);
            // A docid in two segments (FTS5 would let the newer one win): not this reader's.
            if out
                .entries
                .windows(2)
                .any(|pair| pair[0].docid == pair[1].docid)
            {
                return Ok(None);
            }
        }
        Ok(Some(out))
    }
}

/// Reads one segment's doclist of `key` into `out` (FTS5's `fts5LeafSeek` and
/// `fts5SegIterNext`): the term's page, then the following pages while they continue it.
#[allow(clippy::too_many_arguments)]
fn read_segment(
    conn: &Connection,
    path: &str,
    segment: &Segment,
    start: u64,
    key: &[u8],
    within: Option<&[i64]>,
    enough: usize,
    page: &mut Page,
    out: &mut Postings,
) -> Result<SegmentRead> {
    use SegmentRead::{Done, GiveUp};
    let mut page_no = start;
    if !page.load(conn, path, segment.id, page_no)? || !page.has_terms() {
        return Ok(GiveUp);
    }
    let (mut offset, mut doclist_end) = match page.find_term(key) {
        None => return Ok(GiveUp),
        Some(None) => return Ok(Done),
        Some(Some(found)) => found,
    };
    // The doclist may begin on the next page.
    while offset >= page.leaf_end {
        page_no += 1;
        if page_no > segment.last_page || !page.load(conn, path, segment.id, page_no)? {
            return Ok(GiveUp);
        }
        offset = 4;
        doclist_end = page.first_term();
    }
    let Some(first) = varint_at(&page.data, &mut offset) else {
        return Ok(GiveUp);
    };
    let mut docid = first as i64;
    let mut tombstones = Tombstones::new(segment.tombstone_pages);
    let has_tombstones = segment.tombstone_pages > 0;
    // Past this docid (the last one wanted), a read that has counted `enough` may stop.
    let stop_after = within.map_or(i64::MAX, |within| {
        within.last().copied().unwrap_or(i64::MIN)
    });
    let mut cursor = 0usize;
    let mut next_wanted = within.map_or(i64::MIN, |within| {
        within.first().copied().unwrap_or(i64::MAX)
    });
    let mut decoder = PositionDecoder::default();
    // Bytes of the kept entry's position list still to come on later pages.
    let mut pending = 0usize;
    loop {
        // The entries on this page, from `offset` (at the size of `docid`'s entry).
        let data = &page.data[..page.leaf_end];
        let end = doclist_end.unwrap_or(usize::MAX);
        loop {
            let Some(size) = varint_at(data, &mut offset) else {
                return Ok(GiveUp);
            };
            if size & 1 == 1 {
                // A delete marker (legacy deletes; contentless_delete tables use tombstones).
                return Ok(GiveUp);
            }
            let length = (size >> 1) as usize;
            if !has_tombstones || !tombstones.contains(conn, path, segment.id, docid)? {
                out.docs += 1;
                // With `within`, is this docid the next wanted one? (Without, all are.)
                let wanted = match within {
                    None => true,
                    Some(within) if docid >= next_wanted => {
                        while next_wanted < docid {
                            cursor += 1;
                            next_wanted = within.get(cursor).copied().unwrap_or(i64::MAX);
                        }
                        next_wanted == docid
                    }
                    Some(_) => false,
                };
                if wanted {
                    let here = length.min(data.len().saturating_sub(offset));
                    let start = out.positions.len() as u32;
                    decoder = PositionDecoder::default();
                    if !decoder.decode(&data[offset..offset + here], &mut out.positions) {
                        return Ok(GiveUp);
                    }
                    pending = length - here;
                    out.entries.push(Posting {
                        docid,
                        start,
                        end: out.positions.len() as u32,
                    });
                }
            }
            offset += length;
            if docid >= stop_after && out.docs >= enough && pending == 0 {
                return Ok(Done);
            }
            if offset >= data.len() {
                break;
            }
            if offset >= end {
                return Ok(Done);
            }
            let Some(delta) = varint_at(data, &mut offset) else {
                return Ok(GiveUp);
            };
            let Some(next) = i64::try_from(delta)
                .ok()
                .filter(|delta| *delta > 0)
                .and_then(|delta| docid.checked_add(delta))
            else {
                return Ok(GiveUp);
            };
            docid = next;
        }
        // The next entry is on a later page: pages holding only the rest of a position list
        // are passed over (decoded when the list is kept); the doclist ends at a term.
        loop {
            page_no += 1;
            if page_no > segment.last_page {
                return Ok(if pending == 0 { Done } else { GiveUp });
            }
            if !page.load(conn, path, segment.id, page_no)? {
                return Ok(GiveUp);
            }
            if pending > 0 {
                let here = pending.min(page.leaf_end - 4);
                if !decoder.decode(&page.data[4..4 + here], &mut out.positions) {
                    return Ok(GiveUp);
                }
                pending -= here;
                if let Some(entry) = out.entries.last_mut() {
                    entry.end = out.positions.len() as u32;
                }
            }
            let first_rowid = page.first_rowid();
            if first_rowid != 0 && first_rowid < page.leaf_end {
                if pending > 0 {
                    return Ok(GiveUp);
                }
                offset = first_rowid;
                let Some(literal) = varint_at(&page.data, &mut offset) else {
                    return Ok(GiveUp);
                };
                docid = literal as i64;
                doclist_end = page.first_term();
                break;
            }
            if page.has_terms() {
                return Ok(if pending == 0 { Done } else { GiveUp });
            }
        }
    }
}

/// One document of a page being read backwards: its docid and where its position list
/// starts on the page, and its length (it may run on into the following pages).
#[derive(Debug, Clone, Copy)]
struct PageEntry {
    docid: i64,
    offset: u32,
    length: u32,
}

/// One segment's part of a term's doclist, read from its last page back to the term's page.
struct BackwardSegment {
    segment: usize,
    /// The term's page, and where its doclist starts and (when another term follows on the
    /// same page) ends there.
    first_page: u64,
    start: usize,
    end_on_first: Option<usize>,
    /// The page whose entries are in `entries`, and the next one to read (descending).
    page_no: u64,
    next_page: u64,
    exhausted: bool,
    page: Page,
    /// The current page's entries by docid ascending, taken from the back.
    entries: Vec<PageEntry>,
    tombstones: Tombstones,
}

/// A term's documents from the newest back (docid descending), read a leaf page at a time
/// from the end of its doclist in each segment: the newest matches of a common word cost a
/// few pages, not a walk of all of them.
///
/// Every method returns `Ok(None)`/`Ok(false)` both at the end and when the reader gives up
/// on something it does not expect; [`Self::gave_up`] tells them apart.
pub struct Newest {
    segments: Vec<BackwardSegment>,
    /// The head (docid, segment) while it is not passed.
    head: Option<(i64, usize)>,
    docs: usize,
    pages: u64,
    gave_up: bool,
    scratch: Page,
}

impl Index {
    /// Starts reading a term's documents from the newest back.
    pub fn newest(&self, conn: &Connection, path: &str, term: &Term) -> Result<Newest> {
        let mut newest = Newest {
            segments: Vec::with_capacity(self.segments.len()),
            head: None,
            docs: 0,
            pages: 0,
            gave_up: false,
            scratch: Page::new(),
        };
        for (idx, segment) in self.segments.iter().enumerate() {
            let first_page = term.start_pages[idx];
            let mut page = Page::new();
            newest.pages += 1;
            if !page.load(conn, path, segment.id, first_page)? || !page.has_terms() {
                newest.gave_up = true;
                return Ok(newest);
            }
            let (start, end_on_first) = match page.find_term(&term.key) {
                None => {
                    newest.gave_up = true;
                    return Ok(newest);
                }
                Some(None) => continue,
                Some(Some(found)) => found,
            };
            let next_page = if end_on_first.is_some() {
                first_page
            } else {
                term.end_pages[idx]
            };
            newest.segments.push(BackwardSegment {
                segment: idx,
                first_page,
                start,
                end_on_first,
                page_no: 0,
                next_page,
                exhausted: false,
                page,
                entries: Vec::new(),
                tombstones: Tombstones::new(segment.tombstone_pages),
            });
        }
        Ok(newest)
    }
}

impl Newest {
    /// Whether the reader met something it does not expect (its answers are then void).
    pub fn gave_up(&self) -> bool {
        self.gave_up
    }

    /// The documents passed so far ([`Self::pass`]).
    pub fn docs(&self) -> usize {
        self.docs
    }

    /// The leaf pages read so far.
    pub fn pages(&self) -> u64 {
        self.pages
    }

    /// The newest document not passed yet; `None` when there is none left.
    pub fn head(&mut self, index: &Index, conn: &Connection, path: &str) -> Result<Option<i64>> {
        Ok(self
            .head_segment(index, conn, path)?
            .map(|(docid, _)| docid))
    }

    fn head_segment(
        &mut self,
        index: &Index,
        conn: &Connection,
        path: &str,
    ) -> Result<Option<(i64, usize)>> {
        if self.head.is_some() {
            return Ok(self.head);
        }
        let mut best: Option<(i64, usize)> = None;
        for idx in 0..self.segments.len() {
            if self.gave_up {
                return Ok(None);
            }
            if !self.fill(index, conn, path, idx)? {
                continue;
            }
            let Some(entry) = self.segments[idx].entries.last() else {
                continue;
            };
            match best {
                Some((docid, _)) if docid == entry.docid => {
                    // A docid in two segments: not this reader's.
                    self.gave_up = true;
                    return Ok(None);
                }
                Some((docid, _)) if docid > entry.docid => {}
                _ => best = Some((entry.docid, idx)),
            }
        }
        if self.gave_up {
            return Ok(None);
        }
        self.head = best;
        Ok(best)
    }

    /// Passes the newest document (the one [`Self::head`] returned).
    pub fn pass(&mut self, index: &Index, conn: &Connection, path: &str) -> Result<()> {
        if let Some((_, idx)) = self.head_segment(index, conn, path)? {
            self.segments[idx].entries.pop();
            self.docs += 1;
            self.head = None;
        }
        Ok(())
    }

    /// Appends the positions of the newest document (the one [`Self::head`] returned) to
    /// `out`; `false` when there is none or the reader gives up.
    pub fn head_positions(
        &mut self,
        index: &Index,
        conn: &Connection,
        path: &str,
        out: &mut Vec<i64>,
    ) -> Result<bool> {
        let Some((_, idx)) = self.head_segment(index, conn, path)? else {
            return Ok(false);
        };
        let reading = &self.segments[idx];
        let Some(&entry) = reading.entries.last() else {
            return Ok(false);
        };
        let segment = &index.segments[reading.segment];
        let (offset, length) = (entry.offset as usize, entry.length as usize);
        let here = length.min(reading.page.leaf_end.saturating_sub(offset));
        let mut decoder = PositionDecoder::default();
        if !decoder.decode(&reading.page.data[offset..offset + here], out) {
            self.gave_up = true;
            return Ok(false);
        }
        // The rest of a long list is on the following pages.
        let mut pending = length - here;
        let mut page_no = reading.page_no;
        while pending > 0 {
            page_no += 1;
            self.pages += 1;
            if page_no > segment.last_page || !self.scratch.load(conn, path, segment.id, page_no)? {
                self.gave_up = true;
                return Ok(false);
            }
            let here = pending.min(self.scratch.leaf_end - 4);
            if !decoder.decode(&self.scratch.data[4..4 + here], out) {
                self.gave_up = true;
                return Ok(false);
            }
            pending -= here;
        }
        Ok(true)
    }

    /// Makes sure segment `idx` has entries to give, reading pages back until one has some;
    /// `false` when it has none left (or the reader gave up).
    fn fill(&mut self, index: &Index, conn: &Connection, path: &str, idx: usize) -> Result<bool> {
        loop {
            let reading = &mut self.segments[idx];
            if !reading.entries.is_empty() {
                return Ok(true);
            }
            if reading.exhausted || reading.next_page < reading.first_page {
                reading.exhausted = true;
                return Ok(false);
            }
            let segment = &index.segments[reading.segment];
            let page_no = reading.next_page;
            reading.next_page -= 1;
            reading.page_no = page_no;
            self.pages += 1;
            if !reading.page.load(conn, path, segment.id, page_no)? {
                self.gave_up = true;
                return Ok(false);
            }
            let (start, end) = if page_no == reading.first_page {
                (reading.start, reading.end_on_first)
            } else {
                match reading.page.first_rowid() {
                    // No entry begins on this page (it holds the rest of a position list).
                    0 => continue,
                    first => (first, reading.page.first_term()),
                }
            };
            if !decode_entries(
                conn,
                path,
                segment,
                &reading.page,
                start,
                end,
                &mut reading.tombstones,
                &mut reading.entries,
            )? {
                self.gave_up = true;
                return Ok(false);
            }
        }
    }
}

/// Decodes the entries that begin on a page, from the rowid at `start` up to `end` (a term)
/// or the page's end, leaving out deleted documents; `false` when they do not parse.
#[allow(clippy::too_many_arguments)]
fn decode_entries(
    conn: &Connection,
    path: &str,
    segment: &Segment,
    page: &Page,
    start: usize,
    end: Option<usize>,
    tombstones: &mut Tombstones,
    out: &mut Vec<PageEntry>,
) -> Result<bool> {
    let data = page.data.as_slice();
    let leaf_end = page.leaf_end;
    let end = end.unwrap_or(usize::MAX);
    let mut offset = start;
    if offset >= leaf_end {
        return Ok(true);
    }
    let Some(first) = varint_at(data, &mut offset) else {
        return Ok(false);
    };
    let Ok(mut docid) = i64::try_from(first) else {
        return Ok(false);
    };
    loop {
        let Some(size) = varint_at(data, &mut offset) else {
            return Ok(false);
        };
        if size & 1 == 1 || size >> 1 > u64::from(u32::MAX) {
            return Ok(false);
        }
        let length = (size >> 1) as usize;
        if segment.tombstone_pages == 0 || !tombstones.contains(conn, path, segment.id, docid)? {
            out.push(PageEntry {
                docid,
                offset: offset as u32,
                length: length as u32,
            });
        }
        offset += length;
        if offset >= leaf_end {
            return Ok(true);
        }
        if offset >= end {
            return Ok(true);
        }
        let Some(delta) = varint_at(data, &mut offset) else {
            return Ok(false);
        };
        match i64::try_from(delta)
            .ok()
            .filter(|delta| *delta > 0)
            .and_then(|delta| docid.checked_add(delta))
        {
            Some(next) => docid = next,
            None => return Ok(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_read_as_sqlite_writes_them() {
        let mut bytes: &[u8] = &[
            0x05, 0x81, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        ];
        assert_eq!(read_varint(&mut bytes), Some(5));
        assert_eq!(read_varint(&mut bytes), Some(128));
        assert_eq!(read_varint(&mut bytes), Some(u64::MAX));
        assert_eq!(read_varint(&mut bytes), None);
    }

    #[test]
    fn positions_decode_across_columns_and_in_parts() {
        // Column 0: offsets 3, 5; column 2: offset 1, 4.
        let list = [0x05, 0x04, 0x01, 0x02, 0x03, 0x05];
        let mut whole = Vec::new();
        assert!(PositionDecoder::default().decode(&list, &mut whole));
        assert_eq!(whole, vec![3, 5, (2 << 32) + 1, (2 << 32) + 4]);
        for split in 0..=list.len() {
            let mut decoder = PositionDecoder::default();
            let mut parts = Vec::new();
            assert!(decoder.decode(&list[..split], &mut parts));
            assert!(decoder.decode(&list[split..], &mut parts));
            assert_eq!(parts, whole, "split at {split}");
        }
        assert!(!PositionDecoder::default().decode(&[0x00], &mut Vec::new()));
    }

    #[test]
    fn a_structure_record_that_does_not_add_up_is_refused() {
        // Cookie, V2 marker, 1 level, 1 segment, write counter; level: 0 merging, 1 segment:
        // id 3, pages 1..=7, origins 1 and 2, 0 tombstone pages, 0 tombstones, 9 entries.
        let good = [
            0, 0, 0, 1, 0xff, 0, 0, 1, 1, 1, 5, 0, 1, 3, 1, 7, 1, 2, 0, 0, 9,
        ];
        assert_eq!(
            parse_structure(&good),
            Some(vec![Segment {
                id: 3,
                first_page: 1,
                last_page: 7,
                tombstone_pages: 0
            }])
        );
        let mut miscounted = good;
        miscounted[9] = 2;
        assert_eq!(parse_structure(&miscounted), None);
        assert_eq!(parse_structure(&good[..12]), None);
        let mut backwards = good;
        backwards[15] = 0;
        assert_eq!(parse_structure(&backwards), None);
        // A segment a merge in progress has used up: listed, with no pages.
        let mut used_up = good;
        used_up[14] = 0;
        used_up[15] = 0;
        assert_eq!(parse_structure(&used_up), Some(Vec::new()));
    }

    /// A seeded xorshift source.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    const WORDS: [&str; 12] = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
        "juliet", "kilo", "lima",
    ];

    /// An FTS5 table shaped as the store's (migration 0002), its pages `page_size` bytes, its
    /// documents inserted over several transactions (one segment each, merged as FTS5 decides
    /// or not at all), some deleted again (tombstones); returns the connection.
    fn random_index(seed: u64) -> Connection {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let conn = Connection::open_in_memory().expect("memory database");
        conn.execute_batch(
            "CREATE VIRTUAL TABLE search_fts USING fts5 (
                body, content = '', contentless_delete = 1,
                tokenize = 'unicode61 remove_diacritics 2')",
        )
        .expect("create");
        let page_size = [64, 100, 256, 1000, 4050][rng.below(5) as usize];
        let automerge = [0, 2, 4][rng.below(3) as usize];
        conn.execute_batch(&format!(
            "INSERT INTO search_fts (search_fts, rank) VALUES ('pgsz', {page_size});
             INSERT INTO search_fts (search_fts, rank) VALUES ('automerge', {automerge});"
        ))
        .expect("configure");
        let mut docid: i64 = if rng.below(2) == 0 { 1 } else { 1 << 50 };
        let mut docids = Vec::new();
        for _ in 0..1 + rng.below(6) {
            let tx = conn.unchecked_transaction().expect("begin");
            for _ in 0..rng.below(120) {
                let gap = if rng.below(4) == 0 { 1 << 40 } else { 300 };
                docid += 1 + rng.below(gap) as i64;
                // Mostly short documents; some repeat a word hundreds of times (position lists
                // longer than a page).
                let length = match rng.below(10) {
                    0 => 300 + rng.below(700),
                    _ => 1 + rng.below(30),
                };
                let mut words = Vec::with_capacity(length as usize);
                for _ in 0..length {
                    let skew = rng.below(WORDS.len() as u64) * rng.below(WORDS.len() as u64);
                    words.push(WORDS[(skew as usize) / WORDS.len()]);
                }
                tx.execute(
                    "INSERT INTO search_fts (rowid, body) VALUES (?1, ?2)",
                    rusqlite::params![docid, words.join(" ")],
                )
                .expect("insert");
                docids.push(docid);
            }
            tx.commit().expect("commit");
            if !docids.is_empty() && rng.below(3) == 0 {
                for _ in 0..1 + rng.below(20) {
                    let victim = docids[rng.below(docids.len() as u64) as usize];
                    conn.execute("DELETE FROM search_fts WHERE rowid = ?1", [victim])
                        .expect("delete");
                }
            }
            match rng.below(6) {
                0 => conn
                    .execute_batch("INSERT INTO search_fts (search_fts) VALUES ('optimize')")
                    .expect("optimize"),
                // An incremental merge of a few pages leaves its input segments trimmed
                // (their first pages moved on), as a merge in steps does between steps.
                1 | 2 => {
                    let pages = [-8, -30, 5, 40][rng.below(4) as usize];
                    conn.execute(
                        "INSERT INTO search_fts (search_fts, rank) VALUES ('merge', ?1)",
                        [pages],
                    )
                    .expect("merge");
                }
                _ => {}
            }
        }
        conn
    }

    /// FTS5's own answer for a token: its documents, and the positions of each.
    fn fts5_postings(conn: &Connection, token: &str) -> Vec<(i64, Vec<i64>)> {
        let mut stmt = conn
            .prepare("SELECT rowid FROM search_fts WHERE search_fts MATCH ?1 ORDER BY rowid")
            .expect("prepare");
        let docids: Vec<i64> = stmt
            .query_map([format!("\"{token}\"")], |row| row.get(0))
            .expect("query")
            .collect::<rusqlite::Result<_>>()
            .expect("rows");
        conn.execute_batch(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.instances
               USING fts5vocab(main, 'search_fts', 'instance')",
        )
        .expect("vocab");
        let mut positions = conn
            .prepare(
                "SELECT offset FROM temp.instances WHERE term = ?1 AND doc = ?2 ORDER BY offset",
            )
            .expect("prepare");
        docids
            .into_iter()
            .map(|docid| {
                let found: Vec<i64> = positions
                    .query_map(rusqlite::params![token, docid], |row| row.get(0))
                    .expect("query")
                    .collect::<rusqlite::Result<_>>()
                    .expect("rows");
                (docid, found)
            })
            .collect()
    }

    fn postings_of(read: &Postings) -> Vec<(i64, Vec<i64>)> {
        read.docids()
            .map(|docid| (docid, read.positions(docid).expect("kept").to_vec()))
            .collect()
    }

    #[test]
    fn doclists_read_from_the_pages_equal_what_fts5_finds() {
        let mut segments_seen = 0;
        let mut tombstones_seen = 0;
        let mut trimmed_seen = 0;
        for seed in 0..40 {
            let conn = random_index(seed);
            let index = Index::open(&conn, "mem").expect("read").expect("structure");
            segments_seen += index.segments.len();
            tombstones_seen += index
                .segments
                .iter()
                .filter(|segment| segment.tombstone_pages > 0)
                .count();
            trimmed_seen += index
                .segments
                .iter()
                .filter(|segment| segment.first_page > 1)
                .count();
            let mut rng = Rng(seed + 7);
            for token in WORDS.iter().chain(&["zulu", "a", "alphabravo"]) {
                let expected = fts5_postings(&conn, token);
                let term = index.locate(&conn, "mem", token).expect("locate");
                let read = index
                    .read(&conn, "mem", &term, None, usize::MAX)
                    .expect("read")
                    .expect("a supported index");
                assert_eq!(read.docs(), expected.len(), "seed {seed}, {token}");
                assert_eq!(postings_of(&read), expected, "seed {seed}, {token}");
                // Only some documents kept: those, and every document still counted.
                let mut within: Vec<i64> = expected
                    .iter()
                    .map(|(docid, _)| *docid)
                    .filter(|_| rng.below(3) == 0)
                    .collect();
                within.push(i64::MAX);
                let some = index
                    .read(&conn, "mem", &term, Some(&within), usize::MAX)
                    .expect("read")
                    .expect("a supported index");
                assert_eq!(some.docs(), expected.len(), "seed {seed}, {token}");
                let wanted: Vec<(i64, Vec<i64>)> = expected
                    .iter()
                    .filter(|(docid, _)| within.contains(docid))
                    .cloned()
                    .collect();
                assert_eq!(postings_of(&some), wanted, "seed {seed}, {token}");
                // From the newest back: the same documents and positions, in reverse.
                let mut newest = index.newest(&conn, "mem", &term).expect("read");
                let mut backwards = Vec::new();
                while let Some(docid) = newest.head(&index, &conn, "mem").expect("read") {
                    let mut positions = Vec::new();
                    assert!(
                        newest
                            .head_positions(&index, &conn, "mem", &mut positions)
                            .expect("read")
                    );
                    backwards.push((docid, positions));
                    newest.pass(&index, &conn, "mem").expect("read");
                }
                assert!(!newest.gave_up(), "seed {seed}, {token}");
                assert_eq!(newest.docs(), expected.len(), "seed {seed}, {token}");
                backwards.reverse();
                assert_eq!(backwards, expected, "seed {seed}, {token} backwards");
            }
        }
        // The seeds made indexes of several segments, some trimmed by a merge in progress,
        // some with tombstones.
        assert!(segments_seen > 60, "{segments_seen} segments");
        assert!(trimmed_seen > 3, "{trimmed_seen} trimmed segments");
        assert!(
            tombstones_seen > 5,
            "{tombstones_seen} segments with tombstones"
        );
    }

    #[test]
    fn damaged_records_make_the_reader_give_up_or_answer_but_never_panic() {
        // Bytes of the structure record, leaf pages and tombstone pages overwritten or cut
        // short: every read must return (a doclist, or `None`), never panic or loop.
        let mut gave_up = 0;
        for seed in 0..40 {
            let conn = random_index(seed);
            let mut rng = Rng(seed + 99);
            let ids: Vec<i64> = conn
                .prepare("SELECT id FROM search_fts_data")
                .expect("prepare")
                .query_map([], |row| row.get(0))
                .expect("query")
                .collect::<rusqlite::Result<_>>()
                .expect("rows");
            for id in ids {
                if rng.below(3) != 0 {
                    continue;
                }
                let mut block: Vec<u8> = conn
                    .query_row(
                        "SELECT block FROM search_fts_data WHERE id = ?1",
                        [id],
                        |row| row.get(0),
                    )
                    .expect("block");
                if block.is_empty() {
                    continue;
                }
                for _ in 0..1 + rng.below(4) {
                    let at = rng.below(block.len() as u64) as usize;
                    block[at] = rng.next() as u8;
                }
                if rng.below(5) == 0 {
                    block.truncate(rng.below(block.len() as u64) as usize);
                }
                conn.execute(
                    "UPDATE search_fts_data SET block = ?1 WHERE id = ?2",
                    rusqlite::params![block, id],
                )
                .expect("damage");
            }
            let Some(index) = Index::open(&conn, "mem").expect("read") else {
                gave_up += 1;
                continue;
            };
            for token in WORDS {
                let term = index.locate(&conn, "mem", token).expect("locate");
                let whole = index
                    .read(&conn, "mem", &term, None, usize::MAX)
                    .expect("read");
                gave_up += usize::from(whole.is_none());
                let within = [1, 1 << 50, i64::MAX];
                index
                    .read(&conn, "mem", &term, Some(&within), 3)
                    .expect("read");
                let mut newest = index.newest(&conn, "mem", &term).expect("read");
                let mut passed = 0;
                while newest.head(&index, &conn, "mem").expect("read").is_some() {
                    let mut positions = Vec::new();
                    newest
                        .head_positions(&index, &conn, "mem", &mut positions)
                        .expect("read");
                    newest.pass(&index, &conn, "mem").expect("read");
                    passed += 1;
                    assert!(passed <= 100_000, "seed {seed}: {token} does not end");
                }
            }
        }
        // The damage was seen (and survived) rather than missed.
        assert!(gave_up > 20, "{gave_up} reads gave up");
    }
}
