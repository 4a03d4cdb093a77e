package config

import (
	"encoding/json"
	"fmt"

	yamlv2 "go.yaml.in/yaml/v2"

	"github.com/nodenet/nodenet/internal/atomicfile"
)

// Marshal renders cfg as YAML with apiVersion and kind set, fields in the
// order of the Go types (the order of this package's documentation) rather
// than alphabetically. Load reads the result back to an equal config.
func Marshal(cfg *AgentConfiguration) ([]byte, error) {
	out := *cfg
	out.APIVersion, out.Kind = APIVersion, Kind
	j, err := json.Marshal(&out)
	if err != nil {
		return nil, fmt.Errorf("encoding config: %w", err)
	}
	// JSON is YAML; decoding it into a MapSlice keeps the field order.
	var ordered yamlv2.MapSlice
	if err := yamlv2.Unmarshal(j, &ordered); err != nil {
		return nil, fmt.Errorf("encoding config: %w", err)
	}
	y, err := yamlv2.Marshal(typeMetaFirst(ordered))
	if err != nil {
		return nil, fmt.Errorf("encoding config: %w", err)
	}
	return y, nil
}

// typeMetaFirst moves apiVersion, then kind, to the top, where readers of
// Kubernetes-style files look for them.
func typeMetaFirst(m yamlv2.MapSlice) yamlv2.MapSlice {
	out := make(yamlv2.MapSlice, 0, len(m))
	for _, key := range []string{"apiVersion", "kind"} {
		for _, item := range m {
			if item.Key == key {
				out = append(out, item)
			}
		}
	}
	for _, item := range m {
		if item.Key != "apiVersion" && item.Key != "kind" {
			out = append(out, item)
		}
	}
	return out
}

// WriteFile writes cfg as YAML (Marshal) to path atomically: readers see
// the old file or the new one, never a partial one. This is what
// --write-config-to and nodenetctl config convert -o use.
func WriteFile(cfg *AgentConfiguration, path string) error {
	data, err := Marshal(cfg)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, data, 0o644); err != nil {
		return fmt.Errorf("writing config: %w", err)
	}
	return nil
}
