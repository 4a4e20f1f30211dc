package surf

import "github.com/amduat/amduat/trace"

// SetTraceSpool sets the trace stream's options of the runs that follow;
// the returned function restores the defaults.
func SetTraceSpool(o trace.StreamOptions) (restore func()) {
	traceSpool = o
	return func() { traceSpool = trace.StreamOptions{} }
}
