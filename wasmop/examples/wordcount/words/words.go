// Package words counts words the way the wordcount example operation does;
// the operation and the native benchmark row (bench, group wasm) share it,
// so the two compile the same Go code.
package words

// space is 1 for the ASCII whitespace bytes (space, \t, \n, \v, \f, \r)
// and 0 for the others.
var space = [256]uint8{' ': 1, '\t': 1, '\n': 1, '\v': 1, '\f': 1, '\r': 1}

// Counter counts words: maximal runs of bytes that are not ASCII
// whitespace. Feed it with Write (any split of the input gives the same
// count); the zero value is ready to use.
type Counter struct {
	n      uint64
	inWord bool
}

// Write counts the words in p, continuing a word the previous Write ended
// inside. It never fails.
func (c *Counter) Write(p []byte) (int, error) {
	// Branch-free: a word starts at a byte that is not white space after
	// one that is (or after the start). prev is 1 when the byte before
	// was white space.
	total := len(p)
	n, prev := c.n, uint8(1)
	if c.inWord {
		prev = 0
	}
	for len(p) >= 8 {
		s0, s1, s2, s3 := space[p[0]], space[p[1]], space[p[2]], space[p[3]]
		s4, s5, s6, s7 := space[p[4]], space[p[5]], space[p[6]], space[p[7]]
		n += uint64(prev&^s0 + s0&^s1 + s1&^s2 + s2&^s3 + s3&^s4 + s4&^s5 + s5&^s6 + s6&^s7)
		prev, p = s7, p[8:]
	}
	for _, b := range p {
		s := space[b]
		n += uint64(prev &^ s)
		prev = s
	}
	c.n, c.inWord = n, prev == 0
	return total, nil
}

// Count is the number of words written so far.
func (c *Counter) Count() uint64 { return c.n }
