package fakeaws

import (
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// newS3 is gofakes3 in memory, path-style, with bucket tagging added
// (gofakes3 lacks it).
func newS3() http.Handler {
	inner := gofakes3.New(s3mem.New()).Server()
	var mu sync.Mutex
	tags := map[string][]byte{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bucket := strings.Trim(r.URL.Path, "/")
		if r.URL.Query().Has("tagging") && !strings.Contains(bucket, "/") {
			mu.Lock()
			defer mu.Unlock()
			switch r.Method {
			case http.MethodPut:
				b, _ := io.ReadAll(r.Body)
				var tg struct{ XMLName xml.Name }
				if err := xml.Unmarshal(b, &tg); err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				tags[bucket] = b
				return
			case http.MethodGet:
				b, ok := tags[bucket]
				if !ok {
					w.WriteHeader(http.StatusNotFound)
					fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchTagSet</Code><Message>The TagSet does not exist</Message></Error>`)
					return
				}
				w.Write(b)
				return
			}
		}
		if r.Method == http.MethodDelete && !strings.Contains(bucket, "/") && r.URL.RawQuery == "" {
			mu.Lock()
			delete(tags, bucket)
			mu.Unlock()
		}
		inner.ServeHTTP(w, r)
	})
}
