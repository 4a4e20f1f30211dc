// Package words counts words the way the wordcount example operation does;
// the operation and the native benchmark row (bench, group wasm) share it,
// so the two compile the same Go code.
package words

// space marks the ASCII whitespace bytes: space, \t, \n, \v, \f, \r.
var space = [256]bool{' ': true, '\t': true, '\n': true, '\v': true, '\f': true, '\r': true}

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
	n, in := c.n, c.inWord
	for _, b := range p {
		if space[b] {
			in = false
		} else if !in {
			in = true
			n++
		}
	}
	c.n, c.inWord = n, in
	return len(p), nil
}

// Count is the number of words written so far.
func (c *Counter) Count() uint64 { return c.n }
