package hns

import (
	"encoding/json"
	"fmt"
)

// convertJSON copies src into dst through the HNS v2 JSON both types speak:
// our types to hcn's on the way in, hcn's to ours on the way out. Fields
// the other side doesn't model (hcn's Health, say) are dropped by design.
func convertJSON(src, dst any) error {
	b, err := json.Marshal(src)
	if err != nil {
		return fmt.Errorf("encode %T: %w", src, err)
	}
	if err := json.Unmarshal(b, dst); err != nil {
		return fmt.Errorf("decode %T into %T: %w", src, dst, err)
	}
	return nil
}
