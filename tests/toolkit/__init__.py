"""The toolkit's own tests: the template's toolkit/ in projects baked for the configurations they need."""
