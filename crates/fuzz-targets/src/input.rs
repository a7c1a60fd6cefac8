//! [`Input`]: a cursor that turns the fuzzer's bytes into choices.
//!
//! Invariants:
//! - Reading never fails: past the end every read yields zeros or empty slices, so any byte
//!   string is a valid input and the fuzzer never wastes executions on a parse error.
//! - Every choice is a pure function of the bytes, so an input replays exactly.
//! - Slices are borrowed from the input and never longer than what remains: no read allocates
//!   by a length the input declares.

/// The fuzzer's bytes, consumed from the front.
#[derive(Clone, Debug)]
pub struct Input<'a> {
    rest: &'a [u8],
}

impl<'a> Input<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Input<'a> {
        Input { rest: data }
    }

    /// Whether every byte has been consumed.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The bytes not consumed yet, all of them (the cursor is then empty).
    pub fn take_rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.rest)
    }

    /// The next byte, or 0 past the end.
    pub fn byte(&mut self) -> u8 {
        match self.rest.split_first() {
            Some((&byte, rest)) => {
                self.rest = rest;
                byte
            }
            None => 0,
        }
    }

    /// A big-endian u16 from the next 2 bytes (zeros past the end).
    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.byte(), self.byte()])
    }

    /// A big-endian u32 from the next 4 bytes (zeros past the end).
    pub fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }

    /// A big-endian u64 from the next 8 bytes (zeros past the end).
    pub fn u64(&mut self) -> u64 {
        (u64::from(self.u32()) << 32) | u64::from(self.u32())
    }

    /// A value in `0..count` from the next byte; `count` must be 1..=256.
    pub fn below(&mut self, count: usize) -> usize {
        assert!((1..=256).contains(&count), "below({count})");
        usize::from(self.byte()) % count
    }

    /// One of `items`, chosen by the next byte.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    /// Up to `size_bytes` bytes, fewer when the input ends first.
    pub fn bytes(&mut self, size_bytes: usize) -> &'a [u8] {
        let (taken, rest) = self.rest.split_at(size_bytes.min(self.rest.len()));
        self.rest = rest;
        taken
    }

    /// A slice whose length (0..=255) is the next byte, shortened if the input ends first.
    pub fn short_bytes(&mut self) -> &'a [u8] {
        let size_bytes = usize::from(self.byte());
        self.bytes(size_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_past_the_end_yield_zeros_and_empty_slices() {
        let mut input = Input::new(&[1, 2, 3]);
        assert_eq!(input.u16(), 0x0102);
        assert_eq!(input.u32(), 0x0300_0000);
        assert_eq!(input.byte(), 0);
        assert!(input.short_bytes().is_empty());
        assert!(input.is_empty());
    }

    #[test]
    fn a_declared_length_is_cut_to_what_remains() {
        let mut input = Input::new(&[200, b'a', b'b']);
        assert_eq!(input.short_bytes(), b"ab");
        assert_eq!(input.below(7), 0);
    }
}
