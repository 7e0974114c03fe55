//! The per-item scoring code of every policy, with the tables it reads (decay and frequency) and
//! the cosine of an item's embedding with the task's.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

#[cfg(target_arch = "x86_64")]
use super::simd;
use super::{
    Columns, ContentType, Floats, HybridParams, LruParams, Policy, PriorityParams, RetentionParams,
    TypeTtlParams, type_code,
};

/// Bounds of the per-call decay table: at least this many ages...
const DECAY_TABLE_MIN: usize = 64;
/// ...at most this many (512 KiB, within L2)...
const DECAY_TABLE_MAX: usize = 1 << 16;
/// ...and about one entry per this many items, so filling it stays a small part of the call.
const ITEMS_PER_TABLE_ENTRY: usize = 8;
/// `exp(x)` is exactly 0.0 for every `x` below this (the smallest subnormal is `exp(-745.13)`).
pub(super) const EXP_ZERO_BELOW: f64 = -746.0;

/// `exp(-age / scale)` for integer ages: tabulated for small non-negative ages (the table holds
/// the very values `exp` returns), exactly 0.0 where `exp` underflows, computed otherwise.
pub(super) struct Decay {
    scale: f64,
    pub(super) table: Vec<f64>,
}

impl Decay {
    /// A decay of `scale`, or an empty one (never read) when the policy has no use for it.
    pub(super) fn new(scale: Option<f64>, items: usize) -> Self {
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
    pub(super) fn at(&self, age: i64) -> f64 {
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
pub(super) struct Frequency(pub(super) [f64; 5]);

impl Frequency {
    pub(super) fn new() -> Self {
        Self([0, 1, 2, 3, 4].map(|count: i32| (f64::from(count + 1).ln() / 5f64.ln()).min(1.0)))
    }

    /// `count` is validated to be >= 0.
    #[inline(always)]
    pub(super) fn at(&self, count: i64) -> f64 {
        self.0[(count.max(0) as u64).min(4) as usize]
    }
}

/// Dot product with eight independent f64 accumulators (vectorizes; fixed order, so the same
/// result on every thread).
#[inline]
pub(super) fn dot<A: Copy + Into<f64>, B: Copy + Into<f64>>(a: &[A], b: &[B]) -> f64 {
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

/// Cosine similarity of each row of `embedding` with `task`, clamped at 0 (zero-norm rows: 0).
pub(super) struct Semantic<'a> {
    /// The first row found not finite (`usize::MAX`: none so far).
    pub(super) bad_row: AtomicUsize,
    pub(super) embedding: Floats<'a>,
    pub(super) task: Floats<'a>,
    pub(super) task_norm: f64,
    pub(super) dim: usize,
    /// float32 rows and task, and a processor with AVX2 + FMA: the vector path for every row
    /// (decided once per call, so every thread computes the same bits).
    pub(super) simd: bool,
}

impl Semantic<'_> {
    #[inline]
    pub(super) fn at(&self, i: usize) -> f64 {
        let range = i * self.dim..(i + 1) * self.dim;
        #[cfg(target_arch = "x86_64")]
        let vector = match (&self.embedding, &self.task) {
            (Floats::F32(e), Floats::F32(t)) if self.simd => {
                // SAFETY: `simd` is set only when `simd::dot::available()`; the row and the task both
                // have `dim` values.
                Some(unsafe { simd::dot::dots_f32(&e[range.clone()], t) })
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
pub(super) struct Kernel<'a> {
    pub(super) policy: Policy,
    pub(super) current: i64,
    pub(super) cols: Columns<'a>,
    pub(super) decay_a: Decay,
    pub(super) decay_b: Decay,
    pub(super) decay_c: Decay,
    pub(super) frequency: Frequency,
    pub(super) semantic: Option<Semantic<'a>>,
    /// Set when a count column the policy reads holds a negative value (checked in the pass).
    pub(super) negative: AtomicBool,
}

impl Kernel<'_> {
    #[inline(always)]
    pub(super) fn age_since(&self, turns: &[i64], i: usize) -> i64 {
        self.current.saturating_sub(turns[i])
    }

    #[inline(always)]
    pub(super) fn fifo(&self, decay: &Decay, i: usize) -> f64 {
        let created = self.cols.created_turn.expect("validated");
        decay.at(self.age_since(created, i))
    }

    #[inline(always)]
    pub(super) fn lru(&self, p: &LruParams, decay: &Decay, i: usize) -> f64 {
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
    pub(super) fn priority(&self, p: &PriorityParams, decay: &Decay, i: usize) -> f64 {
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
    pub(super) fn type_ttl(&self, p: &TypeTtlParams, i: usize) -> f64 {
        let created = self.cols.created_turn.expect("validated");
        let types = self.cols.content_type.expect("validated");
        let age = self.age_since(created, i).max(0) as f64;
        (1.0 - age / p.ttl[type_code(types[i])]).max(0.0)
    }

    #[inline(always)]
    pub(super) fn retention(&self, p: &RetentionParams, i: usize) -> f64 {
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
    pub(super) fn hybrid(&self, p: &HybridParams, i: usize) -> f64 {
        let w = &p.weights;
        w[0] * self.fifo(&self.decay_a, i)
            + w[1] * self.lru(&p.lru, &self.decay_b, i)
            + w[2] * self.priority(&p.priority, &self.decay_c, i)
            + w[3] * self.type_ttl(&p.type_ttl, i)
    }

    /// `+inf` for pinned items and system prompts, else `score(i)`.
    #[inline(always)]
    pub(super) fn guarded(&self, i: usize, score: impl Fn(usize) -> f64) -> f64 {
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
