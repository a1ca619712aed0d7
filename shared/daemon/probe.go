package daemon

import (
	"context"
	"fmt"
	"net/http"
)

// CheckURL is a container health check: nil when url answers 200 (the runtime images have no
// curl; `oikos health URL` calls this).
func CheckURL(ctx context.Context, hc *http.Client, url string) error {
	if hc == nil {
		hc = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d", url, resp.StatusCode)
	}
	return nil
}
