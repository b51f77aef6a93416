.PHONY: test
test:
	./scripts/test
