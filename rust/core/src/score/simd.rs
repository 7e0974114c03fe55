//! The vector paths of scoring (x86-64, chosen at run time): `e · t` and `e · e` of float32
//! rows, and the whole `retention` policy four items at a time. Each gives the same bits as the
//! scalar kernel (`kernel.rs`).

#[cfg(target_arch = "x86_64")]
pub(super) mod dot {
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
pub(super) mod retention {
    use std::arch::x86_64::*;
    use std::sync::atomic::Ordering;

    use crate::score::RetentionParams;
    use crate::score::kernel::Kernel;

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
