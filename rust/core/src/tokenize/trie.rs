//! A byte trie of the vocabulary's tokens, in two flat arrays.

use rustc_hash::FxHashMap;
use tiktoken_rs::Rank;

/// Up to this many children a node's labels are scanned in order (a few cache lines at most);
/// more are binary searched.
const LINEAR_SCAN_CHILDREN: usize = 16;

/// A trie of the tokens (or of the reversed tokens), nodes numbered breadth first from the root
/// (node 0), so the children of a node are the consecutive nodes
/// `child_start[node]..child_start[node + 1]`: a lookup reads two flat arrays that mostly stay
/// in cache, instead of a large hash table.
pub(super) struct Trie {
    child_start: Vec<u32>,
    /// The byte on the edge into each node (a node's children are in increasing byte order).
    labels: Vec<u8>,
    /// The root's children by byte (`u32::MAX`: none).
    pub(super) root: [u32; 256],
    /// Rank of the token spelled by each node (`Rank::MAX`: a proper prefix only).
    pub(super) node_rank: Vec<Rank>,
}

impl Trie {
    /// The trie of `tokens` (indexed by rank), read backwards if `reversed`.
    pub(super) fn new(tokens: &[&[u8]], reversed: bool) -> Self {
        let mut children = FxHashMap::default();
        // A few new edges per token (tokens share most of their prefixes), reserved at once.
        children.reserve(tokens.len() * 4);
        let mut node_rank = vec![Rank::MAX];
        for (rank, token) in tokens.iter().enumerate() {
            let mut node = 0u32;
            let mut step = |byte: u8| {
                let next = node_rank.len() as u32;
                node = *children
                    .entry((u64::from(node) << 8) | u64::from(byte))
                    .or_insert_with(|| {
                        node_rank.push(Rank::MAX);
                        next
                    });
            };
            if reversed {
                token.iter().rev().for_each(|&b| step(b));
            } else {
                token.iter().for_each(|&b| step(b));
            }
            if !token.is_empty() {
                node_rank[node as usize] = rank as Rank;
            }
        }
        // Renumber breadth first: the children of a node become consecutive, sorted by byte.
        let mut edges: Vec<(u64, u32)> = children.into_iter().collect();
        edges.sort_unstable_by_key(|&(key, _)| key);
        let nodes = node_rank.len();
        let mut edge_start = vec![0u32; nodes + 1];
        for &(key, _) in &edges {
            edge_start[(key >> 8) as usize + 1] += 1;
        }
        for i in 0..nodes {
            edge_start[i + 1] += edge_start[i];
        }
        let mut old_of_new: Vec<u32> = Vec::with_capacity(nodes);
        old_of_new.push(0);
        let mut labels = Vec::with_capacity(nodes);
        labels.push(0u8);
        let mut child_start = Vec::with_capacity(nodes + 1);
        let mut node = 0;
        while node < old_of_new.len() {
            child_start.push(old_of_new.len() as u32);
            let old = old_of_new[node] as usize;
            for &(key, child) in &edges[edge_start[old] as usize..edge_start[old + 1] as usize] {
                old_of_new.push(child);
                labels.push(key as u8);
            }
            node += 1;
        }
        child_start.push(old_of_new.len() as u32);
        let node_rank = old_of_new
            .iter()
            .map(|&old| node_rank[old as usize])
            .collect();
        let mut trie = Self {
            child_start,
            labels,
            root: [u32::MAX; 256],
            node_rank,
        };
        for byte in 0..=255u8 {
            trie.root[byte as usize] = trie.child(0, byte);
        }
        trie
    }

    /// The child of `node` by `byte` (`u32::MAX`: none).
    #[inline]
    pub(super) fn child(&self, node: u32, byte: u8) -> u32 {
        let start = self.child_start[node as usize] as usize;
        let end = self.child_start[node as usize + 1] as usize;
        let labels = &self.labels[start..end];
        let index = if labels.len() <= LINEAR_SCAN_CHILDREN {
            labels.iter().position(|&label| label == byte)
        } else {
            labels.binary_search(&byte).ok()
        };
        index.map_or(u32::MAX, |i| (start + i) as u32)
    }
}
