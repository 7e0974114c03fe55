//! Batch retention scoring: one fused pass per item over caller-owned columns, no temporaries,
//! parallel over chunks for large inputs with results bitwise identical to one thread (each item
//! is computed by the same code whatever the chunking).
//!
//! Scores are `f64`, higher = keep. Pinned items and system prompts score `+inf` under every
//! policy. Decay terms `exp(-age / scale)` with small non-negative integer ages come from a table
//! filled per call with the same `exp`, so they are bitwise equal to computing them directly.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rayon::prelude::*;

use crate::{Error, Result};
use kernel::{Decay, Frequency, Kernel, Semantic, dot};

mod kernel;
#[cfg(target_arch = "x86_64")]
mod simd;
#[cfg(test)]
mod tests;

/// Content types, as `u8` codes in the `content_type` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ContentType {
    /// Never evicted.
    SystemPrompt = 0,
    /// A tool's definition.
    ToolDefinition = 1,
    /// A user message.
    UserMessage = 2,
    /// An assistant response.
    AssistantResponse = 3,
    /// A tool result.
    ToolResult = 4,
    /// Injected memory.
    MemoryInjection = 5,
}

/// Number of content types.
pub const CONTENT_TYPES: usize = 6;

/// A column of floats in either precision.
#[derive(Debug, Clone, Copy)]
pub enum Floats<'a> {
    /// `float32` values.
    F32(&'a [f32]),
    /// `float64` values.
    F64(&'a [f64]),
}

impl Floats<'_> {
    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Floats::F32(v) => v.len(),
            Floats::F64(v) => v.len(),
        }
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    fn get(&self, i: usize) -> f64 {
        match self {
            Floats::F32(v) => f64::from(v[i]),
            Floats::F64(v) => v[i],
        }
    }

    fn first_non_finite(&self) -> Option<usize> {
        match self {
            Floats::F32(v) => v.iter().position(|x| !x.is_finite()),
            Floats::F64(v) => v.iter().position(|x| !x.is_finite()),
        }
    }
}

/// The input columns; every given column has the same length `len`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Columns<'a> {
    /// Tokens of each item (>= 0).
    pub tokens: Option<&'a [i64]>,
    /// Turn each item was created at.
    pub created_turn: Option<&'a [i64]>,
    /// Turn each item was last used at.
    pub last_access_turn: Option<&'a [i64]>,
    /// How often each item was used (>= 0).
    pub access_count: Option<&'a [i64]>,
    /// [`ContentType`] codes (0..=5).
    pub content_type: Option<&'a [u8]>,
    /// Explicit priority in [0, 1] (the `explicit` term of `priority` when not pinned).
    pub priority: Option<Floats<'a>>,
    /// Pinned items (never evicted, score `+inf`), one byte per item: any non-zero byte is
    /// true. Bytes rather than `bool` so that any memory a caller passes (a C `uint8_t` array, a
    /// numpy `uint8` array viewed as `bool`) is a valid value.
    pub pinned: Option<&'a [u8]>,
    /// How many later items refer to each item (>= 0).
    pub reference_count: Option<&'a [i64]>,
    /// Row-major `n x dim` embeddings.
    pub embedding: Option<Floats<'a>>,
    /// The task embedding (`dim` values).
    pub task_embedding: Option<Floats<'a>>,
}

/// `retention`: `recency_weight * exp(-age / max(max_age_turns, 1)) + frequency_weight *
/// min(ln(access_count + 1) / ln 5, 1)`, `age = max(current - last_access_turn, 0)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetentionParams {
    /// Age scale in turns (values below 1 count as 1).
    pub max_age_turns: f64,
    /// Weight of the recency term.
    pub recency_weight: f64,
    /// Weight of the frequency term.
    pub frequency_weight: f64,
}

impl Default for RetentionParams {
    fn default() -> Self {
        Self {
            max_age_turns: 30.0,
            recency_weight: 0.7,
            frequency_weight: 0.3,
        }
    }
}

/// `fifo`: `exp(-(current - created_turn) / half_life)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FifoParams {
    /// Decay scale in turns (> 0).
    pub half_life: f64,
}

impl Default for FifoParams {
    fn default() -> Self {
        Self { half_life: 10.0 }
    }
}

/// `lru`: `exp(-(current - last_access_turn) / half_life)`; items never referenced
/// (`reference_count == 0`, when that column is given) score `unreferenced_score`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LruParams {
    /// Decay scale in turns (> 0).
    pub half_life: f64,
    /// Score of never-referenced items.
    pub unreferenced_score: f64,
}

impl Default for LruParams {
    fn default() -> Self {
        Self {
            half_life: 5.0,
            unreferenced_score: 0.3,
        }
    }
}

/// `priority`: `weights · [recency, semantic, source, reuse, explicit]` with recency
/// `exp(-age / recency_turns)` (`age = max(current - last_access_turn, 0)`), semantic
/// `max(cosine(embedding, task_embedding), 0)` (or `no_embedding_semantic`), source the prestige
/// of the content type (or `unknown_source` without that column), reuse
/// `min(reference_count / reuse_saturation, 1)` (0 without that column), explicit 1 if pinned,
/// else the `priority` column clamped to [0, 1], else 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PriorityParams {
    /// Weights of recency, semantic, source, reuse, explicit.
    pub weights: [f64; 5],
    /// Recency scale in turns (> 0).
    pub recency_turns: f64,
    /// Prestige of each content type, by code.
    pub source_prestige: [f64; CONTENT_TYPES],
    /// Source term without a content type column.
    pub unknown_source: f64,
    /// Reference count at which reuse saturates (> 0).
    pub reuse_saturation: f64,
    /// Semantic term without embeddings.
    pub no_embedding_semantic: f64,
}

impl Default for PriorityParams {
    fn default() -> Self {
        Self {
            weights: [0.30, 0.25, 0.20, 0.15, 0.10],
            recency_turns: 15.0,
            // system, tool_definition, user, assistant, tool_result, memory
            source_prestige: [1.0, 0.9, 1.0, 0.5, 0.3, 0.7],
            unknown_source: 0.5,
            reuse_saturation: 5.0,
            no_embedding_semantic: 0.5,
        }
    }
}

/// `type_ttl`: `max(1 - age / ttl[type], 0)` with `age = max(current - created_turn, 0)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TypeTtlParams {
    /// TTL in turns of each content type, by code (> 0).
    pub ttl: [f64; CONTENT_TYPES],
}

impl Default for TypeTtlParams {
    fn default() -> Self {
        Self {
            ttl: [50.0, 50.0, 50.0, 30.0, 8.0, 20.0],
        }
    }
}

/// `hybrid`: `weights · [fifo, lru, priority, type_ttl]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HybridParams {
    /// Weights of fifo, lru, priority, type_ttl.
    pub weights: [f64; 4],
    /// Parameters of the fifo term.
    pub fifo: FifoParams,
    /// Parameters of the lru term.
    pub lru: LruParams,
    /// Parameters of the priority term.
    pub priority: PriorityParams,
    /// Parameters of the type_ttl term.
    pub type_ttl: TypeTtlParams,
}

impl Default for HybridParams {
    fn default() -> Self {
        Self {
            weights: [0.15, 0.15, 0.40, 0.30],
            fifo: FifoParams::default(),
            lru: LruParams::default(),
            priority: PriorityParams::default(),
            type_ttl: TypeTtlParams::default(),
        }
    }
}

/// A scoring policy with its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Policy {
    /// See [`RetentionParams`].
    Retention(RetentionParams),
    /// See [`FifoParams`].
    Fifo(FifoParams),
    /// See [`LruParams`].
    Lru(LruParams),
    /// See [`PriorityParams`].
    Priority(PriorityParams),
    /// See [`TypeTtlParams`].
    TypeTtl(TypeTtlParams),
    /// See [`HybridParams`].
    Hybrid(HybridParams),
}

impl Policy {
    /// Names of the policies.
    pub const NAMES: [&'static str; 6] =
        ["retention", "fifo", "lru", "priority", "type_ttl", "hybrid"];

    /// The policy of that name with default parameters.
    pub fn by_name(name: &str) -> Result<Self> {
        Ok(match name {
            "retention" => Policy::Retention(RetentionParams::default()),
            "fifo" => Policy::Fifo(FifoParams::default()),
            "lru" => Policy::Lru(LruParams::default()),
            "priority" => Policy::Priority(PriorityParams::default()),
            "type_ttl" => Policy::TypeTtl(TypeTtlParams::default()),
            "hybrid" => Policy::Hybrid(HybridParams::default()),
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "unknown policy {name:?}; known policies: {}",
                    Self::NAMES.join(", ")
                )));
            }
        })
    }

    /// The policy's name.
    pub fn name(&self) -> &'static str {
        match self {
            Policy::Retention(_) => "retention",
            Policy::Fifo(_) => "fifo",
            Policy::Lru(_) => "lru",
            Policy::Priority(_) => "priority",
            Policy::TypeTtl(_) => "type_ttl",
            Policy::Hybrid(_) => "hybrid",
        }
    }

    fn required_columns(&self) -> &'static [&'static str] {
        match self {
            Policy::Retention(_) => &["last_access_turn", "access_count"],
            Policy::Fifo(_) => &["created_turn"],
            Policy::Lru(_) | Policy::Priority(_) => &["last_access_turn"],
            Policy::TypeTtl(_) => &["created_turn", "content_type"],
            Policy::Hybrid(_) => &["created_turn", "last_access_turn", "content_type"],
        }
    }

    fn validate(&self) -> Result<()> {
        fn finite(name: &str, value: f64) -> Result<()> {
            if value.is_finite() {
                Ok(())
            } else {
                Err(Error::InvalidArgument(format!(
                    "parameter {name} must be a finite number, got {value}"
                )))
            }
        }
        fn positive(name: &str, value: f64) -> Result<()> {
            if value.is_finite() && value > 0.0 {
                Ok(())
            } else {
                Err(Error::InvalidArgument(format!(
                    "parameter {name} must be a finite number > 0, got {value}"
                )))
            }
        }
        fn priority(p: &PriorityParams) -> Result<()> {
            p.weights.iter().try_for_each(|&w| finite("weights", w))?;
            positive("recency_turns", p.recency_turns)?;
            p.source_prestige
                .iter()
                .try_for_each(|&w| finite("source_prestige", w))?;
            finite("unknown_source", p.unknown_source)?;
            positive("reuse_saturation", p.reuse_saturation)?;
            finite("no_embedding_semantic", p.no_embedding_semantic)
        }
        fn ttl(p: &TypeTtlParams) -> Result<()> {
            p.ttl.iter().try_for_each(|&t| positive("ttl", t))
        }
        match self {
            Policy::Retention(p) => {
                finite("max_age_turns", p.max_age_turns)?;
                finite("recency_weight", p.recency_weight)?;
                finite("frequency_weight", p.frequency_weight)
            }
            Policy::Fifo(p) => positive("half_life", p.half_life),
            Policy::Lru(p) => {
                positive("half_life", p.half_life)?;
                finite("unreferenced_score", p.unreferenced_score)
            }
            Policy::Priority(p) => priority(p),
            Policy::TypeTtl(p) => ttl(p),
            Policy::Hybrid(p) => {
                p.weights.iter().try_for_each(|&w| finite("weights", w))?;
                positive("fifo.half_life", p.fifo.half_life)?;
                positive("lru.half_life", p.lru.half_life)?;
                finite("lru.unreferenced_score", p.lru.unreferenced_score)?;
                priority(&p.priority)?;
                ttl(&p.type_ttl)
            }
        }
    }
}

/// From this many items (8 MiB of scores), the vector paths write with non-temporal stores.
const STREAM_MIN_ITEMS: usize = 1 << 20;

/// Below this many items, scoring stays on the calling thread.
const PARALLEL_MIN_ITEMS: usize = 1 << 15;
const CHUNK: usize = 1 << 14;

fn check_len(name: &str, len: usize, n: usize) -> Result<()> {
    if len == n {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "column {name} has {len} values but the other columns have {n}"
        )))
    }
}

fn reads_access_count(policy: &Policy) -> bool {
    matches!(policy, Policy::Retention(_))
}

fn reads_reference_count(policy: &Policy) -> bool {
    matches!(
        policy,
        Policy::Lru(_) | Policy::Priority(_) | Policy::Hybrid(_)
    )
}

/// A validated content type code as an index. The clamp is a no-op on validated columns; it keeps
/// a code that another thread changed after validation (a caller's array written during the call)
/// inside the tables instead of panicking.
#[inline(always)]
pub(super) fn type_code(code: u8) -> usize {
    usize::from(code).min(CONTENT_TYPES - 1)
}

fn check_non_negative(name: &str, values: &[i64]) -> Result<()> {
    match values.iter().position(|&v| v < 0) {
        None => Ok(()),
        Some(i) => Err(Error::InvalidArgument(format!(
            "column {name} must be >= 0, got {} at index {i}",
            values[i]
        ))),
    }
}

impl Columns<'_> {
    /// Number of items: the length of the given columns, which must agree.
    pub fn item_count(&self) -> Result<usize> {
        let mut n: Option<(usize, &str)> = None;
        let mut see = |name: &'static str, len: Option<usize>| -> Result<()> {
            if let Some(len) = len {
                match n {
                    None => n = Some((len, name)),
                    Some((m, first)) if m != len => {
                        return Err(Error::InvalidArgument(format!(
                            "column {name} has {len} values but column {first} has {m}"
                        )));
                    }
                    _ => {}
                }
            }
            Ok(())
        };
        see("tokens", self.tokens.map(<[i64]>::len))?;
        see("created_turn", self.created_turn.map(<[i64]>::len))?;
        see("last_access_turn", self.last_access_turn.map(<[i64]>::len))?;
        see("access_count", self.access_count.map(<[i64]>::len))?;
        see("content_type", self.content_type.map(<[u8]>::len))?;
        see("priority", self.priority.as_ref().map(Floats::len))?;
        see("pinned", self.pinned.map(<[u8]>::len))?;
        see("reference_count", self.reference_count.map(<[i64]>::len))?;
        Ok(n.map_or(0, |(len, _)| len))
    }

    /// Checks the values: lengths, ranges, finiteness, embedding shape. Returns `(n, dim)`.
    fn validate(&self, policy: &Policy) -> Result<(usize, usize)> {
        let n = self.item_count()?;
        for &name in policy.required_columns() {
            let given = match name {
                "created_turn" => self.created_turn.is_some(),
                "last_access_turn" => self.last_access_turn.is_some(),
                "access_count" => self.access_count.is_some(),
                _ => self.content_type.is_some(),
            };
            if !given {
                return Err(Error::InvalidArgument(format!(
                    "policy {:?} needs the column {name}",
                    policy.name()
                )));
            }
        }
        if let Some(tokens) = self.tokens {
            check_non_negative("tokens", tokens)?;
        }
        // Count columns the policy reads are checked while scoring (one pass instead of two).
        if let Some(counts) = self.access_count
            && !reads_access_count(policy)
        {
            check_non_negative("access_count", counts)?;
        }
        if let Some(counts) = self.reference_count
            && !reads_reference_count(policy)
        {
            check_non_negative("reference_count", counts)?;
        }
        if let Some(types) = self.content_type
            && let Some(i) = types.iter().position(|&t| usize::from(t) >= CONTENT_TYPES)
        {
            return Err(Error::InvalidArgument(format!(
                "column content_type must hold codes 0..=5, got {} at index {i}",
                types[i]
            )));
        }
        if let Some(priority) = &self.priority
            && let Some(i) = priority.first_non_finite()
        {
            return Err(Error::InvalidArgument(format!(
                "column priority must be finite, got {} at index {i}",
                priority.get(i)
            )));
        }
        let dim = match (&self.embedding, &self.task_embedding) {
            (None, None) => 0,
            (Some(_), None) | (None, Some(_)) => {
                return Err(Error::InvalidArgument(
                    "embedding and task_embedding must be given together".to_owned(),
                ));
            }
            (Some(embedding), Some(task)) => {
                let dim = task.len();
                if dim == 0 {
                    return Err(Error::InvalidArgument(
                        "task_embedding must not be empty".to_owned(),
                    ));
                }
                if n.checked_mul(dim) != Some(embedding.len()) {
                    return Err(Error::InvalidArgument(format!(
                        "embedding must be {n} x {dim} (n items x the task_embedding's \
                         dimension), got {} values",
                        embedding.len()
                    )));
                }
                if let Some(i) = task.first_non_finite() {
                    return Err(Error::InvalidArgument(format!(
                        "task_embedding must be finite, got {} at index {i}",
                        task.get(i)
                    )));
                }
                // The rows are checked for finiteness while they are scored (one pass over the
                // embeddings instead of two), see `Semantic::at`.
                dim
            }
        };
        Ok((n, dim))
    }
}

/// How a scoring call spreads over threads.
#[derive(Clone, Copy)]
enum Spread {
    /// On the calling thread.
    Here,
    /// Over the global rayon pool.
    Global,
    /// Over a pool of this many threads.
    Threads(usize),
}

/// Runs a closure over index ranges of `out`, on this thread or chunked over a pool.
fn spread_over(
    out: &mut [f64],
    spread: Spread,
    run: impl Fn(usize, &mut [f64]) + Sync,
) -> Result<()> {
    let chunked = |out: &mut [f64]| {
        out.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(c, chunk)| run(c * CHUNK, chunk));
    };
    match spread {
        Spread::Here => run(0, out),
        Spread::Global => chunked(out),
        Spread::Threads(k) => rayon::ThreadPoolBuilder::new()
            .num_threads(k)
            .build()
            .map_err(|e| Error::InvalidArgument(format!("cannot start {k} threads: {e}")))?
            .install(|| chunked(out)),
    }
    Ok(())
}

/// Writes `$score` (an expression of the item index `$i`) into every slot of `$out`. A macro, so
/// the per-item code of each policy is expanded into its own loop and fully inlined. Each item is
/// computed by the same code whatever the chunking, so the bits do not depend on the threads.
macro_rules! fill {
    ($out:expr, $spread:expr, |$i:ident| $score:expr) => {
        spread_over($out, $spread, |base, chunk| {
            for (j, slot) in chunk.iter_mut().enumerate() {
                let $i = base + j;
                *slot = $score;
            }
        })
    };
}

/// Scores every item into `out` (one value per item). `threads`: `None` uses the global pool
/// (all cores) for large inputs, `Some(1)` stays on the calling thread, `Some(k)` uses k threads;
/// the results are bitwise identical in every case.
///
/// Errors: columns of different lengths, a column the policy needs but missing, negative tokens
/// or counts, content types outside 0..=5, NaN or infinite floats, an embedding whose shape does
/// not match the task embedding, invalid parameters, `out` of the wrong length. The inputs are
/// never changed. Negative counts in a column the policy reads and non-finite embedding rows are
/// found while scoring (one pass over the data instead of two), so on those errors `out` holds
/// partial results; on the others it is untouched. Embeddings are read only by `priority` and
/// `hybrid`.
pub fn score(
    policy: &Policy,
    current_turn: i64,
    columns: &Columns<'_>,
    out: &mut [f64],
    threads: Option<usize>,
) -> Result<()> {
    policy.validate()?;
    let (n, dim) = columns.validate(policy)?;
    check_len("out", out.len(), n)?;
    if threads == Some(0) {
        return Err(Error::InvalidArgument("threads must be >= 1".to_owned()));
    }
    let scales = match policy {
        Policy::Retention(p) => [Some(p.max_age_turns.max(1.0)), None, None],
        Policy::Fifo(p) => [Some(p.half_life), None, None],
        Policy::Lru(p) => [Some(p.half_life), None, None],
        Policy::Priority(p) => [Some(p.recency_turns), None, None],
        Policy::TypeTtl(_) => [None, None, None],
        Policy::Hybrid(p) => [
            Some(p.fifo.half_life),
            Some(p.lru.half_life),
            Some(p.priority.recency_turns),
        ],
    };
    let semantic = match (columns.embedding, columns.task_embedding) {
        (Some(embedding), Some(task))
            if matches!(policy, Policy::Priority(_) | Policy::Hybrid(_)) =>
        {
            let task_norm = match task {
                Floats::F32(t) => dot(t, t).sqrt(),
                Floats::F64(t) => dot(t, t).sqrt(),
            };
            #[cfg(target_arch = "x86_64")]
            let simd = simd::dot::available();
            #[cfg(not(target_arch = "x86_64"))]
            let simd = false;
            Some(Semantic {
                bad_row: AtomicUsize::new(usize::MAX),
                embedding,
                task,
                task_norm,
                dim,
                simd,
            })
        }
        _ => None,
    };
    let kernel = Kernel {
        policy: *policy,
        current: current_turn,
        cols: *columns,
        decay_a: Decay::new(scales[0], n),
        decay_b: Decay::new(scales[1], n),
        decay_c: Decay::new(scales[2], n),
        frequency: Frequency::new(),
        semantic,
        negative: AtomicBool::new(false),
    };
    // Per-item work grows with the embedding dimension; parallelize earlier then.
    let work = n.saturating_mul(dim.max(1));
    let spread = match threads {
        Some(1) => Spread::Here,
        _ if work < PARALLEL_MIN_ITEMS => Spread::Here,
        None => Spread::Global,
        Some(k) => Spread::Threads(k),
    };
    let k = &kernel;
    match &kernel.policy {
        #[cfg(target_arch = "x86_64")]
        Policy::Retention(p) if simd::retention::available() => {
            let stream = n >= STREAM_MIN_ITEMS;
            // SAFETY: AVX2 is available; the policy is retention with `p` and the columns were
            // validated for all `n` items, of which each call gets a range.
            spread_over(out, spread, |base, chunk| unsafe {
                simd::retention::fill(k, p, base, chunk, stream)
            })?
        }
        Policy::Retention(p) => fill!(out, spread, |i| k.guarded(i, |i| k.retention(p, i)))?,
        Policy::Fifo(_) => fill!(out, spread, |i| k.guarded(i, |i| k.fifo(&k.decay_a, i)))?,
        Policy::Lru(p) => fill!(out, spread, |i| k.guarded(i, |i| k.lru(p, &k.decay_a, i)))?,
        Policy::Priority(p) => fill!(out, spread, |i| k
            .guarded(i, |i| k.priority(p, &k.decay_a, i)))?,
        Policy::TypeTtl(p) => fill!(out, spread, |i| k.guarded(i, |i| k.type_ttl(p, i)))?,
        Policy::Hybrid(p) => fill!(out, spread, |i| k.guarded(i, |i| k.hybrid(p, i)))?,
    }
    if kernel.negative.load(Ordering::Relaxed) {
        if reads_access_count(policy)
            && let Some(counts) = columns.access_count
        {
            check_non_negative("access_count", counts)?;
        }
        if let Some(counts) = columns.reference_count {
            check_non_negative("reference_count", counts)?;
        }
    }
    if let Some(semantic) = &kernel.semantic {
        let row = semantic.bad_row.load(Ordering::Relaxed);
        if row != usize::MAX {
            let values = (0..dim).map(|c| semantic.embedding.get(row * dim + c));
            let detail = match values.enumerate().find(|(_, v)| !v.is_finite()) {
                Some((column, value)) => format!("got {value} at row {row}, column {column}"),
                None => format!("row {row} overflows float64 in its dot products"),
            };
            return Err(Error::InvalidArgument(format!(
                "embedding must be finite, {detail}"
            )));
        }
    }
    Ok(())
}
