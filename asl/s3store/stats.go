package s3store

import (
	"fmt"
	"net/http"
	"sync/atomic"
)

// Stats counts the requests a Store sent to the object store since it was
// opened (SPECS.md §6.7, "Requests per operation"), by HTTP method. Every
// request sent counts once, a retried one once per attempt; a request the
// client library never sent (refused before any I/O) does not count.
type Stats struct {
	GET, LIST, HEAD, PUT, POST, DELETE, Other int64
}

// Total is the number of requests of every method.
func (s Stats) Total() int64 { return s.GET + s.LIST + s.HEAD + s.PUT + s.POST + s.DELETE + s.Other }

// Sub is the requests counted in s and not in before (s taken later).
func (s Stats) Sub(before Stats) Stats {
	return Stats{GET: s.GET - before.GET, LIST: s.LIST - before.LIST, HEAD: s.HEAD - before.HEAD, PUT: s.PUT - before.PUT,
		POST: s.POST - before.POST, DELETE: s.DELETE - before.DELETE, Other: s.Other - before.Other}
}

// String is "N requests (G GET, …)", naming only the methods used.
func (s Stats) String() string {
	t := fmt.Sprintf("%d requests", s.Total())
	sep := " ("
	for _, m := range []struct {
		name string
		n    int64
	}{{"GET", s.GET}, {"LIST", s.LIST}, {"HEAD", s.HEAD}, {"PUT", s.PUT}, {"POST", s.POST}, {"DELETE", s.DELETE}, {"other", s.Other}} {
		if m.n != 0 {
			t += fmt.Sprintf("%s%d %s", sep, m.n, m.name)
			sep = ", "
		}
	}
	if sep == ", " {
		t += ")"
	}
	return t
}

// reqCounter counts requests by method; it sits below the retries
// (retryTransport), so each attempt sent counts.
type reqCounter struct {
	next                                   http.RoundTripper
	get, list, head, put, post, del, other atomic.Int64
}

func (c *reqCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet:
		if req.URL.Query().Has("list-type") {
			c.list.Add(1)
		} else {
			c.get.Add(1)
		}
	case http.MethodHead:
		c.head.Add(1)
	case http.MethodPut:
		c.put.Add(1)
	case http.MethodPost:
		c.post.Add(1)
	case http.MethodDelete:
		c.del.Add(1)
	default:
		c.other.Add(1)
	}
	return c.next.RoundTrip(req)
}

func (c *reqCounter) stats() Stats {
	return Stats{GET: c.get.Load(), LIST: c.list.Load(), HEAD: c.head.Load(), PUT: c.put.Load(), POST: c.post.Load(), DELETE: c.del.Load(), Other: c.other.Load()}
}

// Stats returns the requests sent to the object store so far. Take it
// before and after an operation and Sub the two to count the operation's
// own (other goroutines' requests in between count too).
func (s *Store) Stats() Stats { return s.reqs.stats() }

// Add is the requests counted in s or in o.
func (s Stats) Add(o Stats) Stats {
	return Stats{GET: s.GET + o.GET, LIST: s.LIST + o.LIST, HEAD: s.HEAD + o.HEAD, PUT: s.PUT + o.PUT,
		POST: s.POST + o.POST, DELETE: s.DELETE + o.DELETE, Other: s.Other + o.Other}
}
