"""ros/dds.py: the programs' Fast DDS profiles, used only where the user configured no DDS."""
import os
from pathlib import Path
import xml.etree.ElementTree as ET

import pytest

from rnea_controller.ros import dds

NS = {'dds': 'http://www.eprosima.com'}


@pytest.fixture
def clean(monkeypatch, tmp_path):
    for setting in dds.DDS_SETTINGS:
        monkeypatch.delenv(setting, raising=False)
    monkeypatch.delenv('RMW_IMPLEMENTATION', raising=False)
    monkeypatch.chdir(tmp_path)  # no profiles file in the working directory
    return monkeypatch


@pytest.mark.parametrize('name', ['fast_discovery.xml', 'quick_acks.xml'])
def test_a_profile_is_used_where_nothing_is_configured(clean, name):
    assert dds.use_profiles(name)
    path = Path(os.environ['FASTDDS_DEFAULT_PROFILES_FILE'])
    assert path.name == name and path.is_file()
    assert ET.parse(path).getroot().find('dds:profiles', NS) is not None


def test_the_senders_profile_sets_a_quick_heartbeat_for_its_writers(clean):
    root = ET.parse(Path(dds.__file__).with_name('quick_acks.xml')).getroot()
    writer = root.find('dds:profiles/dds:data_writer', NS)
    assert writer.get('is_default_profile') == 'true'
    period = writer.find('dds:times/dds:heartbeat_period/dds:nanosec', NS)
    assert 0 < int(period.text) <= 100_000_000  # [ns] at most 0.1 s: Fast DDS's default is 3 s


@pytest.mark.parametrize('setting', dds.DDS_SETTINGS)
def test_a_users_dds_setting_is_left_alone(clean, setting):
    clean.setenv(setting, 'theirs')
    assert not dds.use_profiles('quick_acks.xml')
    assert os.environ[setting] == 'theirs'


def test_a_profiles_file_in_the_working_directory_or_another_rmw_is_left_alone(clean,
                                                                                tmp_path):
    (tmp_path / dds.DDS_FILES[0]).write_text('<dds/>')
    assert not dds.use_profiles('quick_acks.xml')
    (tmp_path / dds.DDS_FILES[0]).unlink()
    clean.setenv('RMW_IMPLEMENTATION', 'rmw_cyclonedds_cpp')
    assert not dds.use_profiles('quick_acks.xml')
    assert 'FASTDDS_DEFAULT_PROFILES_FILE' not in os.environ
