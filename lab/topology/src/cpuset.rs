//! `CpuSet`: a set of CPU ids as a growable bitset, with the kernel's two text forms.
//!
//! * The *cpulist* (`"0-3,8-11,16"`), which every `*_list` file and `cpu/online` use and which
//!   [`CpuSet`]'s `Display` prints.
//! * The *mask* (`"000000ff,0000ff00"`): comma-separated 32-bit hex words, most significant
//!   first, as many words as the kernel's `NR_CPUS` needs (not always a multiple of two).
//!
//! Both parsers are strict: anything but digits, `-` and `,` (or hex digits and `,`) is
//! rejected, as are reversed ranges and empty items, so that a truncated or corrupted file is
//! reported rather than silently read as fewer CPUs. An empty text is the empty set.

use alloc::vec::Vec;
use core::fmt;

/// A CPU number as Linux numbers it (the `N` of `cpuN`).
pub type CpuId = usize;

/// The largest CPU id the parsers accept; far above any kernel's `NR_CPUS`.
pub const MAX_CPU_ID: CpuId = (1 << 20) - 1;

/// A set of CPU ids.
///
/// Set operations work word by word, so asking "which idle CPUs share my LLC" is one AND
/// over a few words:
///
/// ```
/// use lagom_topology::CpuSet;
///
/// let llc: CpuSet = "0-7,16-23".parse().unwrap();
/// let idle: CpuSet = [3, 9, 17].into_iter().collect();
/// let candidates = &llc & &idle;
/// assert_eq!(candidates.to_string(), "3,17");
/// assert_eq!(candidates.iter().collect::<Vec<_>>(), [3, 17]);
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuSet {
    /// Bit `n % 64` of word `n / 64` is CPU `n`. Invariant: the last word is non-zero.
    words: Vec<u64>,
}

impl CpuSet {
    /// The empty set.
    pub const fn new() -> CpuSet {
        CpuSet { words: Vec::new() }
    }

    /// The set of CPUs `0..n`.
    pub fn first_n(n: usize) -> CpuSet {
        (0..n).collect()
    }

    /// Builds a set from 64-bit words (bit `n % 64` of word `n / 64` is CPU `n`).
    pub fn from_words(words: &[u64]) -> CpuSet {
        let mut s = CpuSet {
            words: words.to_vec(),
        };
        s.trim();
        s
    }

    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }

    /// Adds `cpu`.
    pub fn insert(&mut self, cpu: CpuId) {
        let w = cpu / 64;
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1 << (cpu % 64);
    }

    /// Removes `cpu`.
    pub fn remove(&mut self, cpu: CpuId) {
        if let Some(w) = self.words.get_mut(cpu / 64) {
            *w &= !(1 << (cpu % 64));
            self.trim();
        }
    }

    /// True when `cpu` is in the set.
    pub fn contains(&self, cpu: CpuId) -> bool {
        self.words
            .get(cpu / 64)
            .is_some_and(|w| w & (1 << (cpu % 64)) != 0)
    }

    /// The number of CPUs in the set (the kernel's `cpumask_weight`).
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// True when the set holds no CPU.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The lowest CPU in the set.
    pub fn first(&self) -> Option<CpuId> {
        self.iter().next()
    }

    /// The highest CPU in the set.
    pub fn last(&self) -> Option<CpuId> {
        let w = self.words.len().checked_sub(1)?;
        Some(w * 64 + 63 - self.words[w].leading_zeros() as usize)
    }

    /// The CPUs in ascending order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            words: &self.words,
            index: 0,
            current: self.words.first().copied().unwrap_or(0),
        }
    }

    /// True when every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.words
            .iter()
            .enumerate()
            .all(|(i, w)| w & !other.words.get(i).copied().unwrap_or(0) == 0)
    }

    /// True when the two sets share a CPU.
    pub fn intersects(&self, other: &CpuSet) -> bool {
        self.words.iter().zip(&other.words).any(|(a, b)| a & b != 0)
    }

    /// Keeps only the CPUs that are also in `other`.
    pub fn intersect_with(&mut self, other: &CpuSet) {
        self.words.truncate(other.words.len());
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= b;
        }
        self.trim();
    }

    /// Adds every CPU of `other`.
    pub fn union_with(&mut self, other: &CpuSet) {
        if self.words.len() < other.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }

    /// Removes every CPU of `other`.
    pub fn difference_with(&mut self, other: &CpuSet) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= !b;
        }
        self.trim();
    }

    /// The set as 64-bit words (bit `n % 64` of word `n / 64` is CPU `n`), without trailing
    /// zero words.
    pub fn as_words(&self) -> &[u64] {
        &self.words
    }

    /// Parses a cpulist (`"0-3,8-11,16"`); `None` when it is malformed.
    ///
    /// Trailing newlines, spaces and NUL bytes are ignored; an empty list is the empty set.
    pub fn parse_list(text: &str) -> Option<CpuSet> {
        let text = trim_sysfs(text);
        let mut set = CpuSet::new();
        if text.is_empty() {
            return Some(set);
        }
        for item in text.split(',') {
            let (lo, hi) = match item.split_once('-') {
                Some((a, b)) => (parse_id(a)?, parse_id(b)?),
                None => {
                    let a = parse_id(item)?;
                    (a, a)
                }
            };
            if lo > hi {
                return None;
            }
            for cpu in lo..=hi {
                set.insert(cpu);
            }
        }
        Some(set)
    }

    /// Parses a mask (`"000000ff,0000ff00"`, 32-bit hex words, most significant first);
    /// `None` when it is malformed.
    ///
    /// Trailing newlines, spaces and NUL bytes are ignored; an empty mask is the empty set.
    pub fn parse_mask(text: &str) -> Option<CpuSet> {
        let text = trim_sysfs(text);
        if text.is_empty() {
            return Some(CpuSet::new());
        }
        let chunks: Vec<&str> = text.split(',').collect();
        if chunks.len() > (MAX_CPU_ID + 1) / 32 {
            return None;
        }
        let mut set = CpuSet::new();
        for (i, chunk) in chunks.iter().rev().enumerate() {
            if chunk.is_empty() || chunk.len() > 8 || !chunk.bytes().all(|b| b.is_ascii_hexdigit())
            {
                return None;
            }
            let word = u32::from_str_radix(chunk, 16).ok()?;
            if word != 0 {
                let w = i / 2;
                if set.words.len() <= w {
                    set.words.resize(w + 1, 0);
                }
                set.words[w] |= u64::from(word) << (32 * (i % 2));
            }
        }
        Some(set)
    }
}

/// Removes what sysfs files end with: newlines, spaces and NUL bytes.
pub(crate) fn trim_sysfs(text: &str) -> &str {
    text.trim_matches(|c: char| c == '\0' || c.is_ascii_whitespace())
}

fn parse_id(s: &str) -> Option<CpuId> {
    if s.is_empty() || s.len() > 7 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let id: CpuId = s.parse().ok()?;
    (id <= MAX_CPU_ID).then_some(id)
}

/// The CPUs of a [`CpuSet`] in ascending order.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    words: &'a [u64],
    index: usize,
    current: u64,
}

impl Iterator for Iter<'_> {
    type Item = CpuId;

    fn next(&mut self) -> Option<CpuId> {
        loop {
            if self.current != 0 {
                let bit = self.current.trailing_zeros() as usize;
                self.current &= self.current - 1;
                return Some(self.index * 64 + bit);
            }
            self.index += 1;
            self.current = *self.words.get(self.index)?;
        }
    }
}

impl<'a> IntoIterator for &'a CpuSet {
    type Item = CpuId;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl FromIterator<CpuId> for CpuSet {
    fn from_iter<I: IntoIterator<Item = CpuId>>(iter: I) -> CpuSet {
        let mut set = CpuSet::new();
        for cpu in iter {
            set.insert(cpu);
        }
        set
    }
}

impl core::str::FromStr for CpuSet {
    type Err = crate::TopologyError;

    /// Parses a cpulist; the error names the text as given.
    fn from_str(s: &str) -> Result<CpuSet, crate::TopologyError> {
        CpuSet::parse_list(s).ok_or_else(|| crate::TopologyError::MalformedCpuList {
            path: alloc::string::String::from("(CPU list argument)"),
            content: alloc::string::String::from(trim_sysfs(s)),
        })
    }
}

impl core::ops::BitAnd for &CpuSet {
    type Output = CpuSet;

    fn bitand(self, other: &CpuSet) -> CpuSet {
        let mut s = self.clone();
        s.intersect_with(other);
        s
    }
}

impl core::ops::BitOr for &CpuSet {
    type Output = CpuSet;

    fn bitor(self, other: &CpuSet) -> CpuSet {
        let mut s = self.clone();
        s.union_with(other);
        s
    }
}

impl core::ops::Sub for &CpuSet {
    type Output = CpuSet;

    fn sub(self, other: &CpuSet) -> CpuSet {
        let mut s = self.clone();
        s.difference_with(other);
        s
    }
}

/// Prints the cpulist form, `"0-3,8"` (empty for the empty set).
impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut iter = self.iter().peekable();
        let mut first = true;
        while let Some(lo) = iter.next() {
            let mut hi = lo;
            while iter.peek() == Some(&(hi + 1)) {
                hi += 1;
                iter.next();
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if hi == lo {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn list(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    #[test]
    fn list_round_trips() {
        for text in ["", "0", "0-3,8-11,16", "5,7,9", "63-65", "0-127", "1,1000"] {
            assert_eq!(list(text).to_string(), text);
        }
        assert_eq!(list("0-3\n\0").to_string(), "0-3");
        assert_eq!(list("\0\n").len(), 0);
        assert_eq!(list("3,1-2,2").to_string(), "1-3");
    }

    #[test]
    fn list_rejects_malformed() {
        for bad in [
            "0-", "-3", "3-1", "0,,1", "a", "0-3,x", "0 -3", "0-3 4", "1:2", "0x3", ",", "2000000",
            "0-15:2/4",
        ] {
            assert_eq!(CpuSet::parse_list(bad), None, "{bad:?} was accepted");
        }
    }

    #[test]
    fn mask_words_are_most_significant_first() {
        assert_eq!(
            CpuSet::parse_mask("00000000,00070000,00000007").unwrap(),
            list("0-2,48-50")
        );
        assert_eq!(CpuSet::parse_mask("ff").unwrap(), list("0-7"));
        assert_eq!(
            CpuSet::parse_mask("80000000,00000000,00000001\n\0").unwrap(),
            list("0,95")
        );
        assert_eq!(
            CpuSet::parse_mask("00000000,00000000").unwrap(),
            CpuSet::new()
        );
        for bad in ["xyz", "ff,", ",ff", "123456789", "ff ff", "0x10"] {
            assert_eq!(CpuSet::parse_mask(bad), None, "{bad:?} was accepted");
        }
    }

    #[test]
    fn set_operations() {
        let a = list("0-7,64-70");
        let b = list("4-67");
        assert_eq!((&a & &b).to_string(), "4-7,64-67");
        assert_eq!((&a | &b).to_string(), "0-70");
        assert_eq!((&a - &b).to_string(), "0-3,68-70");
        assert!(list("65-66").is_subset(&a));
        assert!(!b.is_subset(&a));
        assert!(a.intersects(&b));
        assert!(!list("8-63").intersects(&a));
        assert_eq!(a.len(), 15);
        assert_eq!(a.first(), Some(0));
        assert_eq!(a.last(), Some(70));
        let mut c = list("64");
        c.remove(64);
        assert!(c.is_empty());
        assert_eq!(c, CpuSet::new());
        assert_eq!(CpuSet::from_words(&[1, 0, 0]), list("0"));
    }
}
