package s3store

import "time"

// SetTransientFor shortens the retry bound of transient answers for a
// test and returns the function that restores it.
func SetTransientFor(d time.Duration) (restore func()) {
	old := transientFor
	transientFor = d
	return func() { transientFor = old }
}

// SetPartSize sets the part size of st's large artifacts below the 5 MiB
// that Options allow (S3's minimum part of a multipart upload; a part here
// is an object of its own, SPECS.md §6.7), so that the tests of the parts
// layout run on artifacts of a few MiB instead of tens.
func SetPartSize(st *Store, n uint64) { st.opts.PartSize = n }
