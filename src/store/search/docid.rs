//! The FTS rowid of a document (its "docid") carries what ranking needs, so that a query
//! ranks its candidates from the index alone, without reading a row per candidate:
//!
//! `[entry day, days since 1970: 20 bits][order within that day: 24][length: 7]`
//!
//! Docids therefore sort by entry day, then by insertion within the day: "the most recent
//! matches" are the most recent by the clock (to the day), whatever order sessions were
//! imported in. The length is the document's token count on a log scale (eight steps per
//! doubling, within 4.4 %), which is what bm25 normalises by. Within a day docids are dense,
//! so the gaps FTS5 stores between the docids of a term's documents stay small (a day holds
//! 16.7 million documents; a fuller day spills into the next).

/// Bits below the day.
const DAY_SHIFT: u32 = 31;
/// Bits below the order within a day.
const ORDER_SHIFT: u32 = 7;
/// Documents one day can hold; more spill into the next day.
pub const PER_DAY: i64 = 1 << (DAY_SHIFT - ORDER_SHIFT);
/// The latest day a docid can carry (year 4840).
const MAX_DAY: i64 = (1 << 20) - 1;
/// Milliseconds in a day.
const DAY_MS: i64 = 86_400_000;
/// Steps of the length scale per doubling.
const LENGTH_STEPS: f64 = 8.0;
/// Largest length code (≈ 60,000 tokens; longer documents share it).
const MAX_LENGTH_CODE: i64 = (1 << ORDER_SHIFT) - 1;

/// Returns the day a docid for an entry at `ts_ms` starts from (clamped to the range a
/// docid can carry; day 0 is left unused).
pub fn day_of_ms(ts_ms: i64) -> i64 {
    ts_ms.div_euclid(DAY_MS).clamp(1, MAX_DAY)
}

/// The first docid of a day; the docids of that day are `[first(d), first(d + 1))`
/// (past the last day: `i64::MAX`).
pub fn first_of_day(day: i64) -> i64 {
    if day > MAX_DAY {
        i64::MAX
    } else {
        day.max(0) << DAY_SHIFT
    }
}

/// Whether documents can still be given this day.
pub fn day_in_range(day: i64) -> bool {
    (1..=MAX_DAY).contains(&day)
}

/// Builds a docid.
pub fn make(day: i64, order: i64, tokens: usize) -> i64 {
    (day.clamp(1, MAX_DAY) << DAY_SHIFT)
        | ((order & (PER_DAY - 1)) << ORDER_SHIFT)
        | length_code(tokens)
}

/// The day of a docid.
pub fn day(docid: i64) -> i64 {
    docid >> DAY_SHIFT
}

/// The order within its day of a docid.
pub fn order(docid: i64) -> i64 {
    (docid >> ORDER_SHIFT) & (PER_DAY - 1)
}

/// The entry time a docid stands for, Unix ms: the middle of its day (within 12 hours).
pub fn time_ms(docid: i64) -> i64 {
    day(docid) * DAY_MS + DAY_MS / 2
}

/// The code of a token count.
pub fn length_code(tokens: usize) -> i64 {
    let code = (LENGTH_STEPS * ((tokens as f64) + 1.0).log2()).round() as i64;
    code.clamp(0, MAX_LENGTH_CODE)
}

/// The token count a docid stands for (within 4.4 %).
pub fn length(docid: i64) -> f64 {
    let code = docid & MAX_LENGTH_CODE;
    ((code as f64) / LENGTH_STEPS).exp2() - 1.0
}

/// An SQL expression giving the day a docid for an entry at `ts_column` (Unix ms) starts
/// from, as [`day_of_ms`] computes it.
pub fn day_sql(ts_column: &str) -> String {
    format!(
        "MAX(1, MIN(CASE WHEN {ts_column} < 0 THEN 0 ELSE {ts_column} / {DAY_MS} END, {MAX_DAY}))"
    )
}

/// An SQL expression giving the day of the docid in `column`.
pub fn docid_day_sql(column: &str) -> String {
    format!("({column} >> {DAY_SHIFT})")
}
