"""The lab: what produces her_wrap's own published results, outside the installed package.

Seeded multi-run experiments over the shipped config entries and their one-change variants
(:mod:`lab.experiments`), their result records and tables (:mod:`lab.results`), renaming the rows of a
task when its entry takes a variant's change (:mod:`lab.row_renames`), the generated sections of the
docs pages with the machine note of a measurement (:mod:`lab.doc_sections`), and the
benchmarks behind the docs' ``bench_*`` pages (:mod:`lab.benchmarks`) with the harness they share
(:mod:`lab.bench`). It uses her_wrap's public
API as any user script does; ``scripts/`` runs it from the repository root.
"""
