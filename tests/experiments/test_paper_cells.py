"""The papers' tables as CSV (data/paper_tables): one reader refuses a cell given twice or a value that is not a number,
naming the file and the lines, before any table is measured or written (issue 83)."""
import pytest

from umlkit.experiments.tables import paper_cells

HEAD = "table,section,method,setting,dataset,metric,value,std,note\n"


def test_a_doubled_cell_is_refused_with_its_lines(tmp_path):
    f = tmp_path / "toy.csv"
    f.write_text(HEAD + "Table 1,,A,,CUB,R@1,70.1,,\nTable 1,,B,,CUB,R@1,71.0,,\nTable 1,,A,,CUB,R@1,70.4,,\n")
    with pytest.raises(ValueError, match=r"toy.csv: lines \[2, 4\] give the same cell twice \(table=Table 1, "
                                         r"method=A, dataset=CUB, metric=R@1\); keep one"):
        paper_cells._read_checked(f)


def test_a_value_that_is_not_a_number_and_a_missing_column_are_named(tmp_path):
    f = tmp_path / "toy.csv"
    f.write_text(HEAD + "Table 1,,A,,CUB,R@1,70.1,,\nTable 1,,B,,CUB,R@1,seventy,,\n")
    with pytest.raises(ValueError, match=r"toy.csv: line 3: value 'seventy' is not a number"):
        paper_cells._read_checked(f)
    f.write_text("table,method,value\nTable 1,A,1\n")
    with pytest.raises(ValueError, match=r"column\(s\) \['section', 'setting', 'dataset', 'metric'\] missing"):
        paper_cells._read_checked(f)


def test_the_committed_paper_tables_read_and_an_empty_value_stays_missing(tmp_path):
    for name in ("puma", "oodml", "vptsp", "language_guidance"):
        assert len(paper_cells.paper_table(name)) > 100
    f = tmp_path / "toy.csv"
    f.write_text(HEAD + "Table 1,,A,,CUB,R@1,,,not printed\n")
    assert paper_cells._read_checked(f)["value"].isna().all()
