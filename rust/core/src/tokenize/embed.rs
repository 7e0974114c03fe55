//! A fast offline text embedding from the pre-tokenizer's pieces (feature hashing).

use rayon::prelude::*;

use super::Tokenizer;
use crate::{Error, Result};

/// The largest embedding dimension `embed_many` accepts (a row of 256 KiB; hashed bag-of-pieces
/// vectors gain nothing from more buckets than a text has pieces).
const MAX_EMBEDDING_DIM: usize = 1 << 16;

impl Tokenizer {
    /// A fast offline text embedding: the pieces of `text` (as split for this encoding) hashed
    /// into `dim` signed buckets, L2-normalized (all zeros for empty text). Near-duplicate texts
    /// (repeated status polls, retried commands) have a cosine near 1. Not a semantic model.
    pub fn embed(&self, text: &str, dim: usize) -> Vec<f32> {
        let mut vector = vec![0.0f32; dim];
        if dim == 0 {
            return vector;
        }
        self.vocab.pretokenizer.for_each_piece(text, |piece| {
            let mut hasher = rustc_hash::FxHasher::default();
            std::hash::Hasher::write(&mut hasher, piece.as_bytes());
            let hash = std::hash::Hasher::finish(&hasher);
            let bucket = (hash % dim as u64) as usize;
            vector[bucket] += if hash >> 63 == 1 { -1.0 } else { 1.0 };
        });
        let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
        if norm > 0.0 {
            vector.iter_mut().for_each(|v| *v /= norm);
        }
        vector
    }

    /// [`embed`](Self::embed) of many texts, row-major `texts.len() x dim`, over the cores.
    pub fn embed_many<S: AsRef<str> + Sync>(&self, texts: &[S], dim: usize) -> Result<Vec<f32>> {
        if dim == 0 || dim > MAX_EMBEDDING_DIM {
            return Err(Error::InvalidArgument(format!(
                "dim must be in 1..={MAX_EMBEDDING_DIM}, got {dim}"
            )));
        }
        let len = texts.len().checked_mul(dim).ok_or_else(|| {
            Error::InvalidArgument(format!("{} texts x dim {dim} overflows", texts.len()))
        })?;
        let mut out = vec![0.0f32; len];
        out.par_chunks_mut(dim)
            .zip(texts.par_iter())
            .for_each(|(row, text)| row.copy_from_slice(&self.embed(text.as_ref(), dim)));
        Ok(out)
    }
}
