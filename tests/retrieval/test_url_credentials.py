"""An Elasticsearch URL never carries credentials, in its user part or its query (`?api_key=`,
`token=`, ...): they would be written to the index folder's retriever.json (a DVC output others may
read) and printed in errors. Both places refuse such a URL, naming the environment variables that
carry credentials instead, and never echo the secret."""

from __future__ import annotations

import pytest

from agent_r1.retrieval.search import SearchConfig

SECRET = "s3cr3t-k3y"


@pytest.mark.parametrize("url", [f"http://127.0.0.1:9200/?api_key={SECRET}", f"http://127.0.0.1:9200?token={SECRET}",
                                 f"http://127.0.0.1:9200/?x=1&Access_Token={SECRET}",
                                 f"http://elastic:{SECRET}@127.0.0.1:9200"])
def test_no_index_folder_records_a_url_with_credentials(tmp_path, url):
    from agent_r1.retrieval.base import MANIFEST, write_manifest

    cfg = SearchConfig(backend="elasticsearch", url=url, index_dir=str(tmp_path / "index"))
    with pytest.raises(ValueError, match="AGENT_R1_ES_API_KEY") as err:
        write_manifest(cfg)
    assert SECRET not in str(err.value)
    assert not (tmp_path / "index" / MANIFEST).exists()


def test_the_retriever_refuses_a_key_in_the_query():
    from agent_r1.retrieval.es_backend import ElasticsearchRetriever

    with pytest.raises(ValueError, match="AGENT_R1_ES_API_KEY") as err:
        ElasticsearchRetriever(SearchConfig(backend="elasticsearch", url=f"http://127.0.0.1:9200/?apikey={SECRET}"))
    assert SECRET not in str(err.value)


def test_a_plain_query_is_not_a_credential(tmp_path):
    from agent_r1.retrieval.base import write_manifest

    write_manifest(SearchConfig(backend="elasticsearch", url="http://127.0.0.1:9200/?pretty=true",
                                index_dir=str(tmp_path / "index")))
