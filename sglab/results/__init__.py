"""Result documents: the schema (shared by load, analysis, promotion and reports) and the store."""
