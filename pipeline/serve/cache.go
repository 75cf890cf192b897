package serve

import (
	"container/list"
	"sync"

	"github.com/conditionhq/condition/pipeline"
)

// promptKey is a prompt as the cache knows it: its text and whether it was
// truncated to the context.
type promptKey struct {
	text     string
	truncate bool
}

// promptCache is a bounded LRU of prepared prompts (encoded once, keys,
// values and queries projected), shared by all requests.
type promptCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // front: most recently used; values are *cacheEntry
	byKey map[promptKey]*list.Element
}

type cacheEntry struct {
	key promptKey
	p   *pipeline.Prompt
}

func newPromptCache(max int) *promptCache {
	return &promptCache{max: max, order: list.New(), byKey: map[promptKey]*list.Element{}}
}

// get returns the prompt of k, marking it used, or nil.
func (c *promptCache) get(k promptKey) *pipeline.Prompt {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[k]
	if !ok {
		return nil
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry).p
}

// add keeps p under k, dropping the least recently used past the bound.
func (c *promptCache) add(k promptKey, p *pipeline.Prompt) {
	if c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[k]; ok {
		el.Value.(*cacheEntry).p = p
		c.order.MoveToFront(el)
		return
	}
	c.byKey[k] = c.order.PushFront(&cacheEntry{key: k, p: p})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*cacheEntry).key)
	}
}

// len returns the number of prompts held.
func (c *promptCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
