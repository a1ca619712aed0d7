package webfetch

import (
	"net/http"
	"testing"
)

// GetWith sends the caller's headers to the URL's origin and drops them on a redirect to
// another origin (net/http alone would forward X-Api-Key, and Authorization to a subdomain).
func TestGetWithHeadersStayWithTheirOrigin(t *testing.T) {
	t.Parallel()
	got := make(chan string, 4)
	other := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		got <- "other:" + r.Header.Get("X-Api-Key") + "|" + r.Header.Get("Authorization")
		textHandler("text/plain", "other")(w, r)
	})
	first := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		got <- "first:" + r.Header.Get("X-Api-Key") + "|" + r.Header.Get("Authorization")
		if r.URL.Path == "/away" {
			http.Redirect(w, r, other.URL+"/landing", http.StatusFound)
			return
		}
		textHandler("text/plain", "ok")(w, r)
	})
	f, _, _ := newTestFetcher(t, Config{Allow: []string{"127.0.0.1"}}, nil)
	h := http.Header{"X-Api-Key": {"k1"}, "Authorization": {"Bearer t1"}}
	if _, err := f.GetWith(t.Context(), first.URL+"/here", h); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "first:k1|Bearer t1" {
		t.Fatalf("origin got %q", s)
	}
	if _, err := f.GetWith(t.Context(), first.URL+"/away", h); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "first:k1|Bearer t1" {
		t.Fatalf("origin got %q", s)
	}
	if s := <-got; s != "other:|" {
		t.Fatalf("the other origin got the caller's headers: %q", s)
	}
}
