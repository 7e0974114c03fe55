//! A BM25 index over short documents (archived messages), built for recall: documents are
//! appended in order, removed by tombstone, and a query touches only the postings of its terms,
//! so its cost grows with how common the query's words are, not with the size of the index.
//!
//! Terms are the text's runs of letters and digits, lowercased, without English function words,
//! with the plural `s` removed by Harman's S-stemmer ("flights" and "flight" match). Scores are
//! Okapi BM25 (k1 = 1.2, b = 0.75) with the non-negative idf `ln(1 + (N - df + 0.5) / (df + 0.5))`;
//! ties go to the newer document.
//!
//! ```
//! use ctxwindow_core::lexical::Bm25Index;
//!
//! let mut index = Bm25Index::new();
//! let deploy = index.add("We deploy to eu-west-1 on Fridays");
//! index.add("The cat sat on the mat");
//! let hits = index.search("which region do deployments go to? eu-west", 5);
//! assert_eq!(hits[0].document, deploy);
//! ```

use rustc_hash::FxHashMap;

const K1: f32 = 1.2;
const B: f32 = 0.75;

/// English function words: they say nothing about what a message is about.
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "am", "an", "and", "any", "are", "as", "at", "be",
    "because", "been", "before", "being", "but", "by", "can", "could", "did", "do", "does",
    "doing", "for", "from", "had", "has", "have", "having", "he", "her", "here", "hers", "him",
    "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "my", "myself", "no",
    "nor", "not", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "out", "over",
    "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "them",
    "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until",
    "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom",
    "why", "will", "with", "would", "you", "your", "yours", "yourself",
];

/// Harman's S-stemmer: "ies" -> "y" (not after e/a), "es" -> "e" (not after a/e/o), "s" -> ""
/// (not after u/s).
fn stem(word: &str) -> &str {
    let bytes = word.as_bytes();
    let n = bytes.len();
    if n > 3 && word.ends_with("ies") && !matches!(bytes[n - 4], b'e' | b'a') {
        return &word[..n - 2]; // the caller appends 'y' via `stemmed`
    }
    if n > 3 && word.ends_with("es") && !matches!(bytes[n - 3], b'a' | b'e' | b'o') {
        return &word[..n - 1];
    }
    if n > 2 && word.ends_with('s') && !matches!(bytes[n - 2], b'u' | b's') {
        return &word[..n - 1];
    }
    word
}

fn stemmed(word: &str) -> String {
    let base = stem(word);
    if base.len() + 2 == word.len() && word.ends_with("ies") {
        let mut out = String::with_capacity(base.len());
        out.push_str(&base[..base.len() - 1]);
        out.push('y');
        return out;
    }
    base.to_owned()
}

/// The index terms of `text`, in order (repeats kept).
pub fn terms(text: &str) -> Vec<String> {
    words(text, true)
}

/// The lowercased content words of `text` (function words and single letters dropped), in
/// order, stemmed or not.
pub fn words(text: &str, stem: bool) -> Vec<String> {
    let mut out = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if word.is_empty() {
            continue;
        }
        let lower = word.to_lowercase();
        if STOPWORDS.binary_search(&lower.as_str()).is_ok() {
            continue;
        }
        if lower.chars().count() == 1 && !lower.chars().all(|c| c.is_numeric()) {
            continue;
        }
        out.push(if stem { stemmed(&lower) } else { lower });
    }
    out
}

/// One search result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// The document's number.
    pub document: usize,
    /// Its Okapi BM25 score.
    pub score: f32,
    /// The idf-weighted share of the query's distinct terms it contains, in [0, 1].
    pub coverage: f32,
}

/// An append-only BM25 index (see the module documentation).
#[derive(Debug, Default, Clone)]
pub struct Bm25Index {
    ids: FxHashMap<String, u32>,
    /// Per term, `(document, term frequency)` in increasing document order.
    postings: Vec<Vec<(u32, u32)>>,
    lengths: Vec<u32>,
    total_length: u64,
}

impl Bm25Index {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Indexes `text` as the next document; returns its number (0, 1, 2, ...).
    pub fn add(&mut self, text: &str) -> usize {
        let doc = self.lengths.len();
        let doc32 = u32::try_from(doc).expect("fewer than 2^32 documents");
        let words = terms(text);
        let mut counts: FxHashMap<&str, u32> = FxHashMap::default();
        for word in &words {
            *counts.entry(word.as_str()).or_insert(0) += 1;
        }
        for (word, tf) in counts {
            let next = u32::try_from(self.postings.len()).expect("fewer than 2^32 terms");
            let id = *self.ids.entry(word.to_owned()).or_insert(next);
            if id == next {
                self.postings.push(Vec::new());
            }
            self.postings[id as usize].push((doc32, tf));
        }
        let length = u32::try_from(words.len()).unwrap_or(u32::MAX);
        self.lengths.push(length);
        self.total_length += u64::from(length);
        doc
    }

    /// Forgets the documents numbered `documents` and above (the newest), as if they had never
    /// been added. O(terms in the index): meant for undoing a failed operation.
    pub fn truncate(&mut self, documents: usize) {
        if documents >= self.lengths.len() {
            return;
        }
        for postings in &mut self.postings {
            while postings
                .last()
                .is_some_and(|&(doc, _)| doc as usize >= documents)
            {
                postings.pop();
            }
        }
        for length in self.lengths.drain(documents..) {
            self.total_length -= u64::from(length);
        }
    }

    /// Documents in the index.
    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    /// Whether no document is in the index.
    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    /// The `limit` best documents for `query`, best first (ties: newer first), each with its
    /// BM25 score and its coverage of the query: the idf-weighted share of the query's distinct
    /// terms it contains (a term the index has never seen weighs as a term of one document).
    /// Documents sharing no term with the query are not returned. The work is the length of the
    /// query terms' postings.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Hit> {
        self.search_with(query, limit, true)
    }

    /// [`Self::search`]; `prune` skips, once it is safe, the documents that can no longer
    /// reach the `limit` best (MaxScore: the answer is the same either way).
    fn search_with(&self, query: &str, limit: usize, prune: bool) -> Vec<Hit> {
        let documents = self.lengths.len();
        if limit == 0 || documents == 0 {
            return Vec::new();
        }
        let mut wanted = terms(query);
        wanted.sort_unstable();
        wanted.dedup();
        let n = documents as f32;
        let idf = |df: f32| (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
        let average = (self.total_length as f32 / n).max(1.0);
        let mut weight = 0.0f32;
        let mut lists: Vec<(&[(u32, u32)], f32)> = Vec::with_capacity(wanted.len());
        for term in &wanted {
            match self.ids.get(term.as_str()) {
                Some(&id) if !self.postings[id as usize].is_empty() => {
                    let postings = &self.postings[id as usize];
                    let term_idf = idf(postings.len() as f32);
                    weight += term_idf;
                    lists.push((postings, term_idf));
                }
                _ => weight += idf(1.0), // never archived: it weighs against every document
            }
        }
        lists.sort_by_key(|(postings, _)| postings.len()); // rarest first
        // bounds[i]: the most any document can gain from lists i.. (tf / (tf + norm) < 1).
        let mut bounds = vec![0.0f32; lists.len() + 1];
        for i in (0..lists.len()).rev() {
            bounds[i] = bounds[i + 1] + lists[i].1 * (K1 + 1.0);
        }
        let mut remaining: usize = lists.iter().map(|(postings, _)| postings.len()).sum();
        // (score, idf of the query terms it contains) per document.
        let mut accumulators = vec![(0.0f32, 0.0f32); documents];
        let add = |slot: &mut (f32, f32), doc: u32, tf: u32, term_idf: f32| {
            let tf = tf as f32;
            let norm = K1 * (1.0 - B + B * self.lengths[doc as usize] as f32 / average);
            slot.0 += term_idf * tf * (K1 + 1.0) / (tf + norm);
            slot.1 += term_idf;
        };
        let mut touched: Vec<u32> = Vec::new();
        for (i, &(postings, term_idf)) in lists.iter().enumerate() {
            if prune && touched.len() >= limit && remaining > 4 * touched.len() {
                let mut scores: Vec<f32> = touched
                    .iter()
                    .map(|&d| accumulators[d as usize].0)
                    .collect();
                let (_, &mut threshold, _) =
                    scores.select_nth_unstable_by(limit - 1, |a, b| b.total_cmp(a));
                if bounds[i] < threshold {
                    // No document found by no term so far can reach the limit-th best score:
                    // only those that still can are scored, by looking them up.
                    let mut alive: Vec<u32> = touched
                        .iter()
                        .copied()
                        .filter(|&d| accumulators[d as usize].0 + bounds[i] >= threshold)
                        .collect();
                    alive.sort_unstable();
                    for &(postings, term_idf) in &lists[i..] {
                        for &doc in &alive {
                            if let Ok(k) = postings.binary_search_by_key(&doc, |p| p.0) {
                                add(
                                    &mut accumulators[doc as usize],
                                    doc,
                                    postings[k].1,
                                    term_idf,
                                );
                            }
                        }
                    }
                    touched = alive;
                    break;
                }
            }
            remaining -= postings.len();
            for &(doc, tf) in postings {
                let slot = &mut accumulators[doc as usize];
                if slot.1 == 0.0 {
                    touched.push(doc);
                }
                add(slot, doc, tf, term_idf);
            }
        }
        let mut ranked: Vec<Hit> = touched
            .into_iter()
            .map(|d| Hit {
                document: d as usize,
                score: accumulators[d as usize].0,
                coverage: (accumulators[d as usize].1 / weight).min(1.0),
            })
            .collect();
        let order = |a: &Hit, b: &Hit| {
            b.score
                .total_cmp(&a.score)
                .then(b.document.cmp(&a.document))
        };
        if ranked.len() > limit {
            ranked.select_nth_unstable_by(limit - 1, order);
            ranked.truncate(limit);
        }
        ranked.sort_unstable_by(order);
        ranked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopwords_are_sorted_for_binary_search() {
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn terms_lowercase_stem_and_drop_function_words() {
        assert_eq!(
            terms("The Flights to Paris, 2 cities!"),
            ["flight", "pari", "2", "city"]
        );
        assert_eq!(terms("glasses bus does"), ["glasse", "bus"]);
        assert!(terms("of the and").is_empty());
    }

    #[test]
    fn rare_terms_outrank_common_ones_and_ties_go_to_newer() {
        let mut index = Bm25Index::new();
        index.add("apple banana");
        index.add("apple cherry");
        index.add("apple");
        let hits = index.search("cherry apple", 10);
        assert_eq!(hits[0].document, 1);
        assert!((hits[0].coverage - 1.0).abs() < 1e-6);
        assert!(hits[2].coverage < 0.5); // "apple" alone: the common term
        assert_eq!(hits.len(), 3);
        let ties = index.search("banana cherry", 10);
        assert_eq!(ties.iter().map(|h| h.document).collect::<Vec<_>>(), [1, 0]);
        let unseen = index.search("cherry zebra", 10);
        assert!(unseen[0].coverage < 0.6); // a word never said weighs against
    }

    #[test]
    fn pruning_gives_the_exhaustive_answer() {
        // A deterministic corpus with a skewed vocabulary: a few words in most documents, many rare.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut index = Bm25Index::new();
        for _ in 0..3_000 {
            let words = 3 + next() % 30;
            let text: Vec<String> = (0..words)
                .map(|_| format!("w{}", (next() % 400).pow(2) / 400))
                .collect();
            index.add(&text.join(" "));
        }
        // A rare word then a word of every document: the second is only looked up.
        let mut crafted = Bm25Index::new();
        for i in 0..5_000 {
            crafted.add(&if i % 1_000 == 7 {
                format!("common zebra {i}")
            } else {
                format!("common {i}")
            });
        }
        let pruned = crafted.search_with("zebra common", 3, true);
        assert_eq!(pruned, crafted.search_with("zebra common", 3, false));
        assert_eq!(
            pruned.iter().map(|h| h.document).collect::<Vec<_>>(),
            [4_007, 3_007, 2_007]
        );
        for q in 0..300 {
            let words = 1 + q % 12;
            let query: Vec<String> = (0..words)
                .map(|_| format!("w{}", (next() % 400).pow(2) / 400))
                .collect();
            let query = query.join(" ");
            for limit in [1, 8, 64] {
                assert_eq!(
                    index.search_with(&query, limit, true),
                    index.search_with(&query, limit, false),
                    "{query}"
                );
            }
        }
    }

    #[test]
    fn truncation_undoes_additions_exactly_and_limit_holds() {
        let mut index = Bm25Index::new();
        for i in 0..50 {
            index.add(&format!("note number {i} about widgets"));
        }
        let before = index.search("widgets note 7", 10);
        let copy = index.clone();
        index.add("widgets widgets gadgets");
        index.add("more widgets");
        index.truncate(50);
        index.truncate(500);
        assert_eq!(index.len(), 50);
        assert_eq!(index.search("widgets note 7", 10), before);
        assert_eq!(index.lengths, copy.lengths);
        assert!(
            index
                .postings
                .iter()
                .zip(&copy.postings)
                .all(|(a, b)| a == b)
        );
        assert_eq!(index.search("widgets", 3).len(), 3);
        assert!(index.search("unrelated gadgets", 3).is_empty());
    }
}
