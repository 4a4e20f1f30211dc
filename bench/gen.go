package bench

import (
	"encoding/binary"
	"io"
	"math/rand/v2"
	"sync"
)

// Kind selects the content of a generated stream.
type Kind int

const (
	// Random bytes: incompressible.
	Random Kind = iota
	// Text is English-like prose: words drawn from a fixed vocabulary with
	// a Zipf-like frequency, sentences and wrapped lines. zstd shrinks it to
	// roughly a third; it has no long-range repeats, so compressing it in
	// chunks costs little against compressing it whole.
	Text
)

func (k Kind) String() string {
	if k == Text {
		return "text"
	}
	return "random"
}

// seedBytes expands a 64-bit seed into a ChaCha8 key.
func seedBytes(seed uint64, domain byte) [32]byte {
	var s [32]byte
	binary.BigEndian.PutUint64(s[:], seed)
	s[31] = domain
	return s
}

// NewStream returns a reader of exactly n deterministic bytes of kind k:
// the same (kind, seed, n) always yields the same bytes, on every platform
// and Go version (math/rand/v2 ChaCha8 is specified). Nothing beyond a few
// KiB of state is held, whatever n.
func NewStream(k Kind, seed uint64, n int64) io.Reader {
	if k == Text {
		return &textReader{rng: rand.NewChaCha8(seedBytes(seed, 't')), left: n}
	}
	return &randomReader{rng: rand.NewChaCha8(seedBytes(seed, 'r')), left: n}
}

// randomReader hands out the ChaCha8 output as little-endian 64-bit words
// (faster than ChaCha8.Read); the rest of a partly used word waits in pend,
// so the bytes do not depend on the sizes of the reads.
type randomReader struct {
	rng   *rand.ChaCha8
	left  int64
	pend  [8]byte
	npend int // unread bytes at the end of pend
}

func (r *randomReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n := copy(p, r.pend[8-r.npend:])
	r.npend -= n
	q := p[n:]
	for len(q) >= 8 {
		binary.LittleEndian.PutUint64(q, r.rng.Uint64())
		q = q[8:]
	}
	if len(q) > 0 {
		binary.LittleEndian.PutUint64(r.pend[:], r.rng.Uint64())
		r.npend = 8 - copy(q, r.pend[:])
	}
	r.left -= int64(len(p))
	return len(p), nil
}

// FillRandom fills p with deterministic random bytes for (seed, index):
// distinct (seed, index) pairs give independent contents.
func FillRandom(p []byte, seed, index uint64) {
	var s [32]byte
	binary.BigEndian.PutUint64(s[:], seed)
	binary.BigEndian.PutUint64(s[8:], index)
	s[31] = 'f'
	(&randomReader{rng: rand.NewChaCha8(s), left: int64(len(p))}).Read(p)
}

// vocabulary returns a fixed list of made-up words, each prepared in the
// forms the text generator emits, and a 16-bit table that draws them with a
// Zipf-like (1/rank) frequency. It is built on first use, not at package
// initialisation: every amduat command links this package, and building it
// took 12% of a small get's CPU.
var vocabulary = sync.OnceValue(buildVocabulary)

// Word forms: followed by a space, a comma, a full stop or a newline, and
// capitalized (a sentence start) followed by a space.
const (
	formSpace = iota
	formComma
	formStop
	formNewline
	formCapital
	nforms
)

// wordForm is one word form padded to 16 bytes, so the generator copies a
// fixed-size array and advances by n.
type wordForm struct {
	b [16]byte
	n int
}

type vocab struct {
	forms [][nforms]wordForm
	pick  [1 << 16]uint16
}

func buildVocabulary() *vocab {
	const nwords = 4096
	// Letters weighted roughly by English frequency.
	const letters = "eeeeeeeeeeeettttttttaaaaaaaoooooooiiiiiiinnnnnnnsssssshhhhhhrrrrrrddddllllcccuuummwwffggyyppbbvkjxqz"
	rng := rand.New(rand.NewChaCha8(seedBytes(0, 'v')))
	v := &vocab{forms: make([][nforms]wordForm, nwords)}
	for i := range v.forms {
		n := 1 + rng.IntN(3) + rng.IntN(4) + rng.IntN(4) // 1..9, mostly 4-6
		w := make([]byte, n)
		for j := range w {
			w[j] = letters[rng.IntN(len(letters))]
		}
		capital := append([]byte{w[0] - 'a' + 'A'}, w[1:]...)
		for form, s := range [nforms][]byte{
			formSpace:   append(w[:n:n], ' '),
			formComma:   append(w[:n:n], ", "...),
			formStop:    append(w[:n:n], ". "...),
			formNewline: append(w[:n:n], '\n'),
			formCapital: append(capital, ' '),
		} {
			v.forms[i][form].n = copy(v.forms[i][form].b[:], s)
		}
	}
	// Slot counts proportional to 1/(rank+1), at least one each.
	var h float64
	for i := range nwords {
		h += 1 / float64(i+1)
	}
	free := len(v.pick) - nwords
	slot := 0
	for i := range nwords {
		n := 1 + int(float64(free)/(h*float64(i+1)))
		for ; n > 0 && slot < len(v.pick); n-- {
			v.pick[slot] = uint16(i)
			slot++
		}
	}
	for ; slot < len(v.pick); slot++ {
		v.pick[slot] = uint16(nwords - 1 - slot%nwords)
	}
	return v
}

// textBlock is how much prose textReader composes at a time.
const textBlock = 4096

// textReader composes prose into buf, textBlock bytes at a time, and hands
// it out. Sentences run 4 to 19 words; about one word in eight is followed by
// a comma, and a line ends after every 12 words.
type textReader struct {
	rng      *rand.ChaCha8
	left     int64
	buf      []byte
	off      int
	sentence int // words left in the current sentence
	col      int // words on the current line
}

func (t *textReader) Read(p []byte) (int, error) {
	if t.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > t.left {
		p = p[:t.left]
	}
	n := 0
	for n < len(p) {
		if t.off == len(t.buf) {
			t.fill()
		}
		m := copy(p[n:], t.buf[t.off:])
		t.off += m
		n += m
	}
	t.left -= int64(n)
	return n, nil
}

func (t *textReader) fill() {
	if t.buf == nil {
		t.buf = make([]byte, textBlock+3*16)
	}
	buf := t.buf[:cap(t.buf)]
	voc := vocabulary()
	n := 0
	for n < textBlock {
		r := t.rng.Uint64()
		for k := 0; k < 3; k++ {
			idx := voc.pick[uint16(r)]
			r >>= 16
			form := formSpace
			switch {
			case t.sentence == 0:
				t.sentence = 4 + int(r&15)
				form = formCapital
			case t.sentence == 1:
				form = formStop
			case t.col == 11:
				form = formNewline
			case r&0x70 == 0:
				form = formComma
			}
			t.sentence--
			if t.col++; t.col == 12 {
				t.col = 0
			}
			f := &voc.forms[idx][form]
			*(*[16]byte)(buf[n:]) = f.b
			n += f.n
		}
	}
	t.buf, t.off = buf[:n], 0
}
