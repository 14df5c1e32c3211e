#!/usr/bin/env python3
"""Writes bm25_golden.json: upstream's BM25 KB_search ranking on the real corpus.

Stdlib-only transcription of rank_bm25 0.2.2 (BM25Okapi: _initialize, _calc_idf,
get_scores; numpy's elementwise float64 arithmetic is done in the same order
with Python floats) and of tau2's BM25Indexer/BM25Retriever
(text.lower().split(), sorted(range(n), key=score, reverse=True)[:top_k]).
Documents are loaded sorted by file name, the port's documented order
(upstream uses Path.glob's unsorted order).

Usage: TAU2_DATA_DIR=/path/to/tau2-data python3 bm25_oracle.py > bm25_golden.json
"""
import json, math, os, sys
from pathlib import Path

QUERIES = [
    "how do I dispute a credit card transaction",
    "debit card PIN reset",
    "transfer to human agent reason",
    "open checking account eligibility requirements",
    "cash back rewards dispute",
    "fee fee fee",
    "zzzqqq-not-a-word",
    "the",
    "Card. card, CARD",
    "credit limit increase approval criteria",
    "close bank account with positive balance",
    "replacement credit card lost stolen",
    "interest discrepancy savings",
    "ATM deposit check image",
    "verification 2 of 4 identity fields",
]
TOP = 25

class BM25Okapi:
    def __init__(self, corpus, k1=1.5, b=0.75, epsilon=0.25):
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.corpus_size = 0
        self.doc_freqs, self.idf, self.doc_len = [], {}, []
        nd = {}
        num_doc = 0
        for document in corpus:
            self.doc_len.append(len(document))
            num_doc += len(document)
            frequencies = {}
            for word in document:
                frequencies[word] = frequencies.get(word, 0) + 1
            self.doc_freqs.append(frequencies)
            for word in frequencies:
                nd[word] = nd.get(word, 0) + 1
            self.corpus_size += 1
        self.avgdl = num_doc / self.corpus_size
        idf_sum = 0
        negative = []
        for word, freq in nd.items():
            idf = math.log(self.corpus_size - freq + 0.5) - math.log(freq + 0.5)
            self.idf[word] = idf
            idf_sum += idf
            if idf < 0:
                negative.append(word)
        self.average_idf = idf_sum / len(self.idf)
        eps = self.epsilon * self.average_idf
        for word in negative:
            self.idf[word] = eps

    def get_scores(self, query):
        score = [0.0] * self.corpus_size
        for q in query:
            idf = self.idf.get(q) or 0
            for i, doc in enumerate(self.doc_freqs):
                f = doc.get(q) or 0
                score[i] += idf * (f * (self.k1 + 1) / (f + self.k1 * (1 - self.b + self.b * self.doc_len[i] / self.avgdl)))
        return score

def main():
    root = Path(os.environ.get("TAU2_DATA_DIR", "../../../../shared/tau2-data"))
    ddir = root / "tau2" / "domains" / "banking_knowledge" / "documents"
    docs = [json.loads(p.read_text()) for p in sorted(ddir.glob("*.json"), key=lambda p: p.name.encode())]
    ids = [d["id"] for d in docs]
    bm = BM25Okapi([d["content"].lower().split() for d in docs])
    out = {"n_docs": len(docs), "avgdl": bm.avgdl.hex(), "average_idf": bm.average_idf.hex(), "queries": []}
    for q in QUERIES:
        s = bm.get_scores(q.lower().split())
        order = sorted(range(len(s)), key=lambda i: s[i], reverse=True)[:TOP]
        out["queries"].append({
            "query": q,
            "nonzero": sum(1 for x in s if x != 0),
            "top": [[ids[i], s[i].hex(), f"{s[i]:.4f}"] for i in order],
        })
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")

main()
