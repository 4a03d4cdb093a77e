package cni

import (
	"errors"

	"github.com/containernetworking/plugins/pkg/ns"
)

// isNetnsError recognizes the plugins library's "not a netns" errors.
func isNetnsError(err error) bool {
	var notExist ns.NSPathNotExistErr
	var notNS ns.NSPathNotNSErr
	return errors.As(err, &notExist) || errors.As(err, &notNS)
}
