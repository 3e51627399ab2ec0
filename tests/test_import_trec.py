"""import-trec: TREC qrels + topics (SGML, XML, TSV) → a golden set that validates and runs."""

from __future__ import annotations

import gzip

import pytest
from typer.testing import CliRunner

from kebab_mlflow.cli import app
from kebab_mlflow.errors import TrecFileError
from kebab_mlflow.golden import load_golden_set
from kebab_mlflow.importers.trec import import_trec, read_trec_qrels, read_trec_topics

runner = CliRunner()

QRELS = """301 0 FBIS3-10082 1
301 0 FBIS3-10169 0
302 0 FT934-4848 2
302 0 LA010189-0001 1
303 0 FR940104-0-00001 0
999 0 X 1
"""

SGML = """<top>
<num> Number: 301
<title> International Organized Crime

<desc> Description:
Identify organizations that participate in international criminal activity.

<narr> Narrative:
A relevant document must as a minimum identify the organization.
</top>

<top>
<num> Number: 302
<title> Poliomyelitis and
Post-Polio
<desc> Description:
Is the disease of Poliomyelitis (polio) under control in the world?
</top>

<top>
<num> Number: 303
<title> Hubble Telescope Achievements
<desc> Description:
Identify positive accomplishments of the Hubble telescope since it was launched.
</top>
"""

XML = """<topics>
  <topic number="301" type="faceted">
    <query>international organized crime</query>
    <description>Identify organizations in international crime.</description>
  </topic>
  <topic number="302"><query>polio post-polio</query>
    <description>Is polio under control?</description></topic>
</topics>
"""


def _write(path, text):
    path.write_text(text)
    return path


def test_sgml_topics_titles_and_descriptions(tmp_path):
    topics, form = read_trec_topics(_write(tmp_path / "t.txt", SGML))
    assert form == "sgml"
    assert topics == {"301": "International Organized Crime", "302": "Poliomyelitis and Post-Polio",
                      "303": "Hubble Telescope Achievements"}
    desc, _ = read_trec_topics(tmp_path / "t.txt", "desc")
    assert desc["302"] == "Is the disease of Poliomyelitis (polio) under control in the world?"


def test_xml_and_tsv_topics(tmp_path):
    topics, form = read_trec_topics(_write(tmp_path / "t.xml", XML))
    assert form == "xml" and topics["302"] == "polio post-polio"
    assert read_trec_topics(tmp_path / "t.xml", "desc")[0]["301"] == (
        "Identify organizations in international crime.")
    topics, form = read_trec_topics(_write(tmp_path / "q.tsv", "1\tfirst  query\n\n2\tsecond\n"))
    assert (form, topics) == ("tsv", {"1": "first query", "2": "second"})


def test_import_writes_a_valid_golden_set(tmp_path):
    qrels = tmp_path / "qrels.txt"
    qrels.write_bytes(gzip.compress(QRELS.encode()))  # gzipped input is read too
    summary = import_trec(qrels, _write(tmp_path / "topics.301-303", SGML), tmp_path / "g.yaml")
    assert (summary.written, summary.topics_without_judgments,
            summary.judged_topics_not_in_topics) == (2, 1, 1)
    golden = load_golden_set(tmp_path / "g.yaml")
    assert golden.name == "topics"
    q301, q302 = golden.queries
    assert (q301.id, q301.query) == ("301", "International Organized Crime")
    # graded: the judged non-relevant doc is kept with grade 0 (judged, not relevant)
    assert dict(q301.expected_doc_ids) == {"FBIS3-10082": 1, "FBIS3-10169": 0}
    assert q301.relevant_doc_grades == {"FBIS3-10082": 1}
    assert dict(q302.expected_doc_ids) == {"FT934-4848": 2, "LA010189-0001": 1}


@pytest.mark.parametrize("qrels, message", [
    ("301 0 D1\n", "qrels.txt:1: expected 'qid iteration docno relevance'"),
    ("301 0 D1 1\n301 0 D2 high\n", "qrels.txt:2: expected"),
])
def test_bad_qrels_name_the_line(tmp_path, qrels, message):
    with pytest.raises(TrecFileError, match=message):
        read_trec_qrels(_write(tmp_path / "qrels.txt", qrels))


def test_bad_topics_name_the_line(tmp_path):
    with pytest.raises(TrecFileError, match=r"t.txt:3: <top> without <num>"):
        read_trec_topics(_write(tmp_path / "t.txt", "x\n\n<top>\n<title> no number\n</top>\n"))
    with pytest.raises(TrecFileError, match=r"q.tsv:2: expected qid<TAB>query"):
        read_trec_topics(_write(tmp_path / "q.tsv", "1\tok\njust text\n"))
    with pytest.raises(TrecFileError, match=r"q.tsv:2: topic '1' is listed twice"):
        read_trec_topics(_write(tmp_path / "q.tsv", "1\tok\n1\tagain\n"))


def test_cli_import_trec(tmp_path):
    qrels, topics = _write(tmp_path / "qrels", QRELS), _write(tmp_path / "t.xml", XML)
    res = runner.invoke(app, ["import-trec", str(qrels), str(topics), "--out",
                              str(tmp_path / "g.yaml"), "--name", "robust"])
    assert res.exit_code == 0, res.output
    assert "wrote 2 queries" in res.stdout and "(xml topics)" in res.stdout
    assert load_golden_set(tmp_path / "g.yaml").name == "robust"
    res = runner.invoke(app, ["import-trec", str(tmp_path / "nope"), str(topics), "--out",
                              str(tmp_path / "g2.yaml")])
    assert res.exit_code == 2 and "cannot read" in res.output
    assert not (tmp_path / "g2.yaml").exists()
