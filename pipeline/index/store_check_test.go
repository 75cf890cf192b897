package index_test

import (
	"github.com/conditionhq/condition/internal/objstore"
	"github.com/conditionhq/condition/pipeline/index"
)

// objstore's URLReader is the Store the command line hands in.
var _ index.Store = (*objstore.URLReader)(nil)
