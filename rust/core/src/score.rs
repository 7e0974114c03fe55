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

/// Bounds of the per-call decay table: at least this many ages...
const DECAY_TABLE_MIN: usize = 64;
/// ...at most this many (512 KiB, within L2)...
const DECAY_TABLE_MAX: usize = 1 << 16;
/// ...and about one entry per this many items, so filling it stays a small part of the call.
const ITEMS_PER_TABLE_ENTRY: usize = 8;
/// `exp(x)` is exactly 0.0 for every `x` below this (the smallest subnormal is `exp(-745.13)`).
const EXP_ZERO_BELOW: f64 = -746.0;

/// `exp(-age / scale)` for integer ages: tabulated for small non-negative ages (the table holds
/// the very values `exp` returns), exactly 0.0 where `exp` underflows, computed otherwise.
struct Decay {
    scale: f64,
    table: Vec<f64>,
}

impl Decay {
    /// A decay of `scale`, or an empty one (never read) when the policy has no use for it.
    fn new(scale: Option<f64>, items: usize) -> Self {
        let Some(scale) = scale else {
            return Self {
                scale: 1.0,
                table: Vec::new(),
            };
        };
        let wanted = (items / ITEMS_PER_TABLE_ENTRY).clamp(DECAY_TABLE_MIN, DECAY_TABLE_MAX);
        // Past -EXP_ZERO_BELOW * scale every value is 0.0: no need to tabulate further.
        let nonzero = (-EXP_ZERO_BELOW * scale).ceil();
        let len = if nonzero < wanted as f64 {
            nonzero as usize + 1
        } else {
            wanted
        };
        let table = (0..len).map(|age| (-(age as f64) / scale).exp()).collect();
        Self { scale, table }
    }

    #[inline(always)]
    fn at(&self, age: i64) -> f64 {
        if let Ok(index) = usize::try_from(age)
            && let Some(&value) = self.table.get(index)
        {
            return value;
        }
        let x = -(age as f64) / self.scale;
        if x < EXP_ZERO_BELOW { 0.0 } else { x.exp() }
    }
}

/// `min(ln(count + 1) / ln 5, 1)` for counts >= 0, tabulated: only 0..=3 are below 1, so
/// the lookup is a clamp of the count to 4 (branch-free).
struct Frequency([f64; 5]);

impl Frequency {
    fn new() -> Self {
        Self([0, 1, 2, 3, 4].map(|count: i32| (f64::from(count + 1).ln() / 5f64.ln()).min(1.0)))
    }

    /// `count` is validated to be >= 0.
    #[inline(always)]
    fn at(&self, count: i64) -> f64 {
        self.0[(count.max(0) as u64).min(4) as usize]
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
fn type_code(code: u8) -> usize {
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

/// Dot product with eight independent f64 accumulators (vectorizes; fixed order, so the same
/// result on every thread).
#[inline]
fn dot<A: Copy + Into<f64>, B: Copy + Into<f64>>(a: &[A], b: &[B]) -> f64 {
    let mut acc = [0.0f64; 8];
    let mut chunks_a = a.chunks_exact(8);
    let mut chunks_b = b.chunks_exact(8);
    for (ca, cb) in chunks_a.by_ref().zip(chunks_b.by_ref()) {
        for k in 0..8 {
            acc[k] += ca[k].into() * cb[k].into();
        }
    }
    let mut tail = 0.0;
    for (&x, &y) in chunks_a.remainder().iter().zip(chunks_b.remainder()) {
        tail += x.into() * y.into();
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

#[cfg(target_arch = "x86_64")]
mod simd {
    //! `e · t` and `e · e` of float32 rows accumulated in float64 with AVX2 and FMA, chosen at
    //! run time when the processor has them.
    use std::arch::x86_64::*;

    /// Whether this processor can run [`dots_f32`].
    pub fn available() -> bool {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }

    /// `(e · t, e · e)` in float64.
    ///
    /// # Safety
    /// The processor supports AVX2 and FMA ([`available`]); `e` and `t` have the same length.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dots_f32(e: &[f32], t: &[f32]) -> (f64, f64) {
        debug_assert_eq!(e.len(), t.len());
        let n = e.len().min(t.len());
        let mut dot = [_mm256_setzero_pd(); 2];
        let mut norm = [_mm256_setzero_pd(); 2];
        let mut i = 0;
        while i + 8 <= n {
            // SAFETY: i + 8 <= n, so both 8-float loads are in bounds.
            let (ev, tv) = unsafe {
                (
                    _mm256_loadu_ps(e.as_ptr().add(i)),
                    _mm256_loadu_ps(t.as_ptr().add(i)),
                )
            };
            let e_lo = _mm256_cvtps_pd(_mm256_castps256_ps128(ev));
            let e_hi = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(ev));
            let t_lo = _mm256_cvtps_pd(_mm256_castps256_ps128(tv));
            let t_hi = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(tv));
            dot[0] = _mm256_fmadd_pd(e_lo, t_lo, dot[0]);
            dot[1] = _mm256_fmadd_pd(e_hi, t_hi, dot[1]);
            norm[0] = _mm256_fmadd_pd(e_lo, e_lo, norm[0]);
            norm[1] = _mm256_fmadd_pd(e_hi, e_hi, norm[1]);
            i += 8;
        }
        let sum = |v: [__m256d; 2]| {
            let mut lanes = [0.0f64; 4];
            // SAFETY: lanes holds exactly four f64.
            unsafe { _mm256_storeu_pd(lanes.as_mut_ptr(), _mm256_add_pd(v[0], v[1])) };
            (lanes[0] + lanes[2]) + (lanes[1] + lanes[3])
        };
        let (mut dot_sum, mut norm_sum) = (sum(dot), sum(norm));
        for k in i..n {
            let (x, y) = (f64::from(e[k]), f64::from(t[k]));
            dot_sum += x * y;
            norm_sum += x * x;
        }
        (dot_sum, norm_sum)
    }
}

/// `retention` over one range of items with AVX2: four items per step, the decay read from the
/// table, the frequency chosen with blends (no table), the same multiplications
/// and addition as [`Kernel::retention`] (no fused multiply-add), so the same bits. A step whose
/// ages fall outside the table goes through the scalar code. With `stream`, the results are
/// written with non-temporal stores (no read of the output's cache lines, and no eviction of
/// the inputs), for outputs larger than the caches.
#[cfg(target_arch = "x86_64")]
mod retention_simd {
    use std::arch::x86_64::*;
    use std::sync::atomic::Ordering;

    use super::{Kernel, RetentionParams};

    /// How many items ahead the input columns are prefetched.
    const PREFETCH_AHEAD: usize = 1024;

    /// Whether this processor can run [`fill`].
    pub fn available() -> bool {
        is_x86_feature_detected!("avx2")
    }

    /// Four bytes of a `u8` column as four 64-bit lanes, all ones where the byte is zero.
    ///
    /// # Safety
    /// The processor supports AVX2; `bytes` has at least 4 values.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn zero_bytes(bytes: &[u8]) -> __m256i {
        let word = i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        _mm256_cmpeq_epi64(
            _mm256_cvtepu8_epi64(_mm_cvtsi32_si128(word)),
            _mm256_setzero_si256(),
        )
    }

    /// Scores items `base..base + out.len()` into `out`.
    ///
    /// # Safety
    /// The processor supports AVX2 ([`available`]); the kernel's policy is `retention` with
    /// `p`, and its columns were validated to hold every item of the range.
    #[target_feature(enable = "avx2")]
    pub unsafe fn fill(
        k: &Kernel<'_>,
        p: &RetentionParams,
        base: usize,
        out: &mut [f64],
        stream: bool,
    ) {
        let n = out.len();
        let range = base..base + n;
        let last = &k.cols.last_access_turn.expect("validated")[range.clone()];
        let access = &k.cols.access_count.expect("validated")[range.clone()];
        let pinned = k.cols.pinned.map(|v| &v[range.clone()]);
        let types = k.cols.content_type.map(|v| &v[range]);
        let scalar = |j: usize| k.guarded(base + j, |i| k.retention(p, i));
        let table = &k.decay_a.table;
        // Streaming stores need 32-byte aligned addresses: the first items go one by one.
        let head = if stream {
            out.as_ptr().align_offset(32).min(n)
        } else {
            0
        };
        for (j, slot) in out[..head].iter_mut().enumerate() {
            *slot = scalar(j);
        }
        let current = _mm256_set1_epi64x(k.current);
        let len = _mm256_set1_epi64x(i64::try_from(table.len()).unwrap_or(i64::MAX));
        let minus_one = _mm256_set1_epi64x(-1);
        let zero = _mm256_setzero_si256();
        let (one, two, three) = (
            _mm256_set1_epi64x(1),
            _mm256_set1_epi64x(2),
            _mm256_set1_epi64x(3),
        );
        let f = k.frequency.0.map(|x| _mm256_set1_pd(x));
        let recency_weight = _mm256_set1_pd(p.recency_weight);
        let frequency_weight = _mm256_set1_pd(p.frequency_weight);
        let infinity = _mm256_set1_pd(f64::INFINITY);
        let mut negative = zero;
        let mut j = head;
        while j + 4 <= n {
            if j + PREFETCH_AHEAD < n {
                // Hints only: a prefetch of any address is harmless; these are in bounds.
                _mm_prefetch::<_MM_HINT_T0>(last[j + PREFETCH_AHEAD..].as_ptr().cast());
                _mm_prefetch::<_MM_HINT_T0>(access[j + PREFETCH_AHEAD..].as_ptr().cast());
            }
            // SAFETY: j + 4 <= n, the length of `last` and `access`.
            let (l, a) = unsafe {
                (
                    _mm256_loadu_si256(last.as_ptr().add(j).cast()),
                    _mm256_loadu_si256(access.as_ptr().add(j).cast()),
                )
            };
            // age = current - last where last < current (the exact difference, as an unsigned
            // number), else 0: `max(current.saturating_sub(last), 0)` when it is below 2^63.
            let older = _mm256_cmpgt_epi64(current, l);
            let age = _mm256_and_si256(older, _mm256_sub_epi64(current, l));
            let in_table = _mm256_and_si256(
                _mm256_cmpgt_epi64(len, age),
                _mm256_cmpgt_epi64(age, minus_one),
            );
            let v = if _mm256_movemask_pd(_mm256_castsi256_pd(in_table)) == 0xf {
                // Four scalar loads: faster than a gather instruction on current processors.
                let mut ages = [0u64; 4];
                // SAFETY: `ages` holds four u64.
                unsafe { _mm256_storeu_si256(ages.as_mut_ptr().cast(), age) };
                // Every lane of `age` is in 0..table.len(): the bounds checks never fail.
                let decay = _mm256_set_pd(
                    table[ages[3] as usize],
                    table[ages[2] as usize],
                    table[ages[1] as usize],
                    table[ages[0] as usize],
                );
                // min(ln(count + 1) / ln 5, 1) by count: 0 (and below), 1, 2, 3, 4 and above.
                let mut freq = f[0];
                freq =
                    _mm256_blendv_pd(freq, f[1], _mm256_castsi256_pd(_mm256_cmpeq_epi64(a, one)));
                freq =
                    _mm256_blendv_pd(freq, f[2], _mm256_castsi256_pd(_mm256_cmpeq_epi64(a, two)));
                freq = _mm256_blendv_pd(
                    freq,
                    f[3],
                    _mm256_castsi256_pd(_mm256_cmpeq_epi64(a, three)),
                );
                freq = _mm256_blendv_pd(
                    freq,
                    f[4],
                    _mm256_castsi256_pd(_mm256_cmpgt_epi64(a, three)),
                );
                let score = _mm256_add_pd(
                    _mm256_mul_pd(recency_weight, decay),
                    _mm256_mul_pd(frequency_weight, freq),
                );
                // +inf for pinned items and system prompts; their counts are not read.
                let mut guard = zero;
                if let Some(pinned) = pinned {
                    // SAFETY: AVX2 is enabled here; j + 4 <= n, the length of `pinned`.
                    let unpinned = unsafe { zero_bytes(&pinned[j..j + 4]) };
                    guard = _mm256_andnot_si256(unpinned, minus_one);
                }
                if let Some(types) = types {
                    // SAFETY: as above, for `types`.
                    guard = _mm256_or_si256(guard, unsafe { zero_bytes(&types[j..j + 4]) });
                }
                negative = _mm256_or_si256(negative, _mm256_andnot_si256(guard, a));
                _mm256_blendv_pd(score, infinity, _mm256_castsi256_pd(guard))
            } else {
                let lanes = [scalar(j), scalar(j + 1), scalar(j + 2), scalar(j + 3)];
                // SAFETY: `lanes` holds four f64.
                unsafe { _mm256_loadu_pd(lanes.as_ptr()) }
            };
            // SAFETY: j + 4 <= n; with `stream`, out[j] is 32-byte aligned (out[head] is, and
            // j - head is a multiple of 4 f64).
            unsafe {
                if stream {
                    _mm256_stream_pd(out.as_mut_ptr().add(j), v);
                } else {
                    _mm256_storeu_pd(out.as_mut_ptr().add(j), v);
                }
            }
            j += 4;
        }
        for (q, slot) in out.iter_mut().enumerate().skip(j) {
            *slot = scalar(q);
        }
        if _mm256_movemask_pd(_mm256_castsi256_pd(negative)) != 0 {
            k.negative.store(true, Ordering::Relaxed);
        }
        if stream {
            // Orders the non-temporal stores before anything the caller does next.
            _mm_sfence();
        }
    }
}

/// Cosine similarity of each row of `embedding` with `task`, clamped at 0 (zero-norm rows: 0).
struct Semantic<'a> {
    /// The first row found not finite (`usize::MAX`: none so far).
    bad_row: AtomicUsize,
    embedding: Floats<'a>,
    task: Floats<'a>,
    task_norm: f64,
    dim: usize,
    /// float32 rows and task, and a processor with AVX2 + FMA: the vector path for every row
    /// (decided once per call, so every thread computes the same bits).
    simd: bool,
}

impl Semantic<'_> {
    #[inline]
    fn at(&self, i: usize) -> f64 {
        let range = i * self.dim..(i + 1) * self.dim;
        #[cfg(target_arch = "x86_64")]
        let vector = match (&self.embedding, &self.task) {
            (Floats::F32(e), Floats::F32(t)) if self.simd => {
                // SAFETY: `simd` is set only when `simd::available()`; the row and the task both
                // have `dim` values.
                Some(unsafe { simd::dots_f32(&e[range.clone()], t) })
            }
            _ => None,
        };
        #[cfg(not(target_arch = "x86_64"))]
        let vector: Option<(f64, f64)> = None;
        let (dot_task, norm2) = if let Some(dots) = vector {
            dots
        } else {
            match (&self.embedding, &self.task) {
                (Floats::F32(e), Floats::F32(t)) => {
                    (dot(&e[range.clone()], t), dot(&e[range.clone()], &e[range]))
                }
                (Floats::F32(e), Floats::F64(t)) => {
                    (dot(&e[range.clone()], t), dot(&e[range.clone()], &e[range]))
                }
                (Floats::F64(e), Floats::F32(t)) => {
                    (dot(&e[range.clone()], t), dot(&e[range.clone()], &e[range]))
                }
                (Floats::F64(e), Floats::F64(t)) => {
                    (dot(&e[range.clone()], t), dot(&e[range.clone()], &e[range]))
                }
            }
        };
        if !(dot_task.is_finite() && norm2.is_finite()) {
            self.bad_row.fetch_min(i, Ordering::Relaxed);
            return 0.0;
        }
        let denominator = norm2.sqrt() * self.task_norm;
        if denominator == 0.0 {
            0.0
        } else {
            (dot_task / denominator).max(0.0)
        }
    }
}

/// Everything one item's score needs, prepared once per call.
struct Kernel<'a> {
    policy: Policy,
    current: i64,
    cols: Columns<'a>,
    decay_a: Decay,
    decay_b: Decay,
    decay_c: Decay,
    frequency: Frequency,
    semantic: Option<Semantic<'a>>,
    /// Set when a count column the policy reads holds a negative value (checked in the pass).
    negative: AtomicBool,
}

impl Kernel<'_> {
    #[inline(always)]
    fn age_since(&self, turns: &[i64], i: usize) -> i64 {
        self.current.saturating_sub(turns[i])
    }

    #[inline(always)]
    fn fifo(&self, decay: &Decay, i: usize) -> f64 {
        let created = self.cols.created_turn.expect("validated");
        decay.at(self.age_since(created, i))
    }

    #[inline(always)]
    fn lru(&self, p: &LruParams, decay: &Decay, i: usize) -> f64 {
        if let Some(refs) = self.cols.reference_count {
            if refs[i] < 0 {
                self.negative.store(true, Ordering::Relaxed);
            }
            if refs[i] == 0 {
                return p.unreferenced_score;
            }
        }
        let last = self.cols.last_access_turn.expect("validated");
        decay.at(self.age_since(last, i))
    }

    #[inline(always)]
    fn priority(&self, p: &PriorityParams, decay: &Decay, i: usize) -> f64 {
        let last = self.cols.last_access_turn.expect("validated");
        let recency = decay.at(self.age_since(last, i).max(0));
        let semantic = self
            .semantic
            .as_ref()
            .map_or(p.no_embedding_semantic, |s| s.at(i));
        let source = self
            .cols
            .content_type
            .map_or(p.unknown_source, |t| p.source_prestige[type_code(t[i])]);
        let reuse = self.cols.reference_count.map_or(0.0, |r| {
            if r[i] < 0 {
                self.negative.store(true, Ordering::Relaxed);
            }
            (r[i] as f64 / p.reuse_saturation).min(1.0)
        });
        let explicit = if self.cols.pinned.is_some_and(|pinned| pinned[i] != 0) {
            1.0
        } else {
            self.cols
                .priority
                .as_ref()
                .map_or(0.0, |v| v.get(i).clamp(0.0, 1.0))
        };
        let w = &p.weights;
        w[0] * recency + w[1] * semantic + w[2] * source + w[3] * reuse + w[4] * explicit
    }

    #[inline(always)]
    fn type_ttl(&self, p: &TypeTtlParams, i: usize) -> f64 {
        let created = self.cols.created_turn.expect("validated");
        let types = self.cols.content_type.expect("validated");
        let age = self.age_since(created, i).max(0) as f64;
        (1.0 - age / p.ttl[type_code(types[i])]).max(0.0)
    }

    #[inline(always)]
    fn retention(&self, p: &RetentionParams, i: usize) -> f64 {
        let last = self.cols.last_access_turn.expect("validated");
        let access = self.cols.access_count.expect("validated");
        let count = access[i];
        if count < 0 {
            self.negative.store(true, Ordering::Relaxed);
        }
        let age = self.age_since(last, i).max(0);
        p.recency_weight * self.decay_a.at(age) + p.frequency_weight * self.frequency.at(count)
    }

    #[inline(always)]
    fn hybrid(&self, p: &HybridParams, i: usize) -> f64 {
        let w = &p.weights;
        w[0] * self.fifo(&self.decay_a, i)
            + w[1] * self.lru(&p.lru, &self.decay_b, i)
            + w[2] * self.priority(&p.priority, &self.decay_c, i)
            + w[3] * self.type_ttl(&p.type_ttl, i)
    }

    /// `+inf` for pinned items and system prompts, else `score(i)`.
    #[inline(always)]
    fn guarded(&self, i: usize, score: impl Fn(usize) -> f64) -> f64 {
        if self.cols.pinned.is_some_and(|pinned| pinned[i] != 0)
            || self
                .cols
                .content_type
                .is_some_and(|t| t[i] == ContentType::SystemPrompt as u8)
        {
            f64::INFINITY
        } else {
            score(i)
        }
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
            let simd = simd::available();
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
        Policy::Retention(p) if retention_simd::available() => {
            let stream = n >= STREAM_MIN_ITEMS;
            // SAFETY: AVX2 is available; the policy is retention with `p` and the columns were
            // validated for all `n` items, of which each call gets a range.
            spread_over(out, spread, |base, chunk| unsafe {
                retention_simd::fill(k, p, base, chunk, stream)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_matches_the_formula() {
        let last = [10i64, 5, 0, 12];
        let access = [0i64, 1, 10, 3];
        let cols = Columns {
            last_access_turn: Some(&last),
            access_count: Some(&access),
            ..Default::default()
        };
        let mut out = [0.0; 4];
        score(
            &Policy::by_name("retention").unwrap(),
            10,
            &cols,
            &mut out,
            None,
        )
        .unwrap();
        for i in 0..4 {
            let age = (10 - last[i]).max(0) as f64;
            let want = 0.7 * (-age / 30.0).exp()
                + 0.3 * (((access[i] + 1) as f64).ln() / 5f64.ln()).min(1.0);
            assert!(
                (out[i] - want).abs() <= 1e-15 * want.abs(),
                "{i}: {} vs {want}",
                out[i]
            );
        }
    }

    #[test]
    fn pinned_and_system_prompts_are_infinite() {
        let created = [0i64, 0, 0];
        let types = [0u8, 2, 4];
        let pinned = [0u8, 2, 0];
        let cols = Columns {
            created_turn: Some(&created),
            content_type: Some(&types),
            pinned: Some(&pinned),
            ..Default::default()
        };
        let mut out = [0.0; 3];
        score(&Policy::by_name("fifo").unwrap(), 3, &cols, &mut out, None).unwrap();
        assert_eq!(out[0], f64::INFINITY);
        assert_eq!(out[1], f64::INFINITY);
        assert!((out[2] - (-0.3f64).exp()).abs() < 1e-15);
    }

    #[test]
    fn threads_do_not_change_the_bits() {
        let n = 100_000;
        let created: Vec<i64> = (0..n).map(|i| (i * 7919 % 2000) as i64).collect();
        let last: Vec<i64> = (0..n).map(|i| (i * 104_729 % 3000) as i64).collect();
        let types: Vec<u8> = (0..n).map(|i| (i % 6) as u8).collect();
        let cols = Columns {
            created_turn: Some(&created),
            last_access_turn: Some(&last),
            content_type: Some(&types),
            ..Default::default()
        };
        let policy = Policy::by_name("hybrid").unwrap();
        let mut one = vec![0.0; n];
        let mut three = vec![0.0; n];
        score(&policy, 2500, &cols, &mut one, Some(1)).unwrap();
        score(&policy, 2500, &cols, &mut three, Some(3)).unwrap();
        assert!(
            one.iter()
                .zip(&three)
                .all(|(a, b)| a.to_bits() == b.to_bits())
        );
    }

    /// `retention` by its definition, one item at a time.
    fn retention_reference(current: i64, last: i64, count: i64, guarded: bool) -> f64 {
        if guarded {
            return f64::INFINITY;
        }
        let age = current.saturating_sub(last).max(0);
        let x = -(age as f64) / 30.0;
        let decay = if x < EXP_ZERO_BELOW { 0.0 } else { x.exp() };
        let frequency = ((count.max(0) + 1).min(5) as f64).ln() / 5f64.ln();
        0.7 * decay + 0.3 * frequency.min(1.0)
    }

    /// The vector path (gathers, blends, streaming stores past `STREAM_MIN_ITEMS`, scalar steps
    /// for ages outside the table, unaligned heads and tails) against the definition, bit for bit.
    #[test]
    fn retention_vector_path_equals_the_definition() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for (n, offset, current) in [
            (3, 0, 50),
            (37, 1, 50),
            (1000, 3, 2000),
            (STREAM_MIN_ITEMS + 13, 1, 5000),
            (STREAM_MIN_ITEMS + 6, 2, i64::MIN + 3),
            (70_001, 0, i64::MAX - 2),
        ] {
            let last: Vec<i64> = (0..n)
                .map(|_| match next() % 16 {
                    0 => [i64::MIN, i64::MAX, current, current + 1, -1][(next() % 5) as usize],
                    1 => current.wrapping_sub((next() % 100_000) as i64),
                    _ => current.wrapping_sub((next() % 6000) as i64 - 100),
                })
                .collect();
            let access: Vec<i64> = (0..n).map(|_| (next() % 8) as i64).collect();
            let pinned: Vec<u8> = (0..n).map(|_| u8::from(next() % 9 == 0) * 7).collect();
            let types: Vec<u8> = (0..n).map(|_| (next() % 6) as u8).collect();
            for (with_pinned, with_types) in [(false, false), (true, false), (true, true)] {
                let cols = Columns {
                    last_access_turn: Some(&last),
                    access_count: Some(&access),
                    pinned: with_pinned.then_some(pinned.as_slice()),
                    content_type: with_types.then_some(types.as_slice()),
                    ..Default::default()
                };
                let mut buffer = vec![0.0; n + offset];
                let out = &mut buffer[offset..];
                let policy = Policy::by_name("retention").unwrap();
                score(&policy, current, &cols, out, None).unwrap();
                for i in 0..n {
                    let guarded = (with_pinned && pinned[i] != 0) || (with_types && types[i] == 0);
                    let want = retention_reference(current, last[i], access[i], guarded);
                    assert_eq!(out[i].to_bits(), want.to_bits(), "n {n}, item {i}");
                }
            }
        }
    }

    /// A negative count is an error unless its item is pinned (never scored), on every path.
    #[test]
    fn negative_counts_of_pinned_items_are_not_read() {
        let n = 4096;
        let last = vec![10i64; n];
        let mut access = vec![1i64; n];
        let mut pinned = vec![0u8; n];
        access[1234] = -1;
        pinned[1234] = 1;
        let policy = Policy::by_name("retention").unwrap();
        let mut out = vec![0.0; n];
        let cols = Columns {
            last_access_turn: Some(&last),
            access_count: Some(&access),
            pinned: Some(&pinned),
            ..Default::default()
        };
        score(&policy, 20, &cols, &mut out, None).unwrap();
        assert_eq!(out[1234], f64::INFINITY);
        let unpinned = vec![0u8; n];
        let cols = Columns {
            pinned: Some(&unpinned),
            ..cols
        };
        let err = score(&policy, 20, &cols, &mut out, None);
        assert!(matches!(err, Err(Error::InvalidArgument(m)) if m.contains("access_count")));
    }

    #[test]
    fn bad_input_is_rejected() {
        let short = [1i64];
        let long = [1i64, 2];
        let cols = Columns {
            last_access_turn: Some(&short),
            access_count: Some(&long),
            ..Default::default()
        };
        let mut out = [0.0; 1];
        let err = score(
            &Policy::by_name("retention").unwrap(),
            0,
            &cols,
            &mut out,
            None,
        );
        assert!(matches!(err, Err(Error::InvalidArgument(m)) if m.contains("access_count")));
        let cols = Columns {
            created_turn: Some(&short),
            ..Default::default()
        };
        let err = score(
            &Policy::by_name("retention").unwrap(),
            0,
            &cols,
            &mut out,
            None,
        );
        assert!(matches!(err, Err(Error::InvalidArgument(m)) if m.contains("last_access_turn")));
        assert!(Policy::by_name("lfu").is_err());
    }
}
