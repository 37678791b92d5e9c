"""The Fast DDS profiles of the project's programs (XML files beside this module), each used
only where the user configured no DDS of their own: no DDS setting in the environment, no
profiles file that Fast DDS loads by itself from the working directory, Fast DDS the RMW
(Kilted's default)."""
import os
from pathlib import Path

DDS_SETTINGS = ('FASTDDS_DEFAULT_PROFILES_FILE', 'FASTRTPS_DEFAULT_PROFILES_FILE',
                'ROS_DISCOVERY_SERVER', 'FASTDDS_ENVIRONMENT_FILE')
# the profiles Fast DDS loads by itself from the working directory
DDS_FILES = ('DEFAULT_FASTDDS_PROFILES.xml', 'DEFAULT_FASTRTPS_PROFILES.xml')


def use_profiles(name: str) -> bool:
    """Have Fast DDS load the profiles file `name` (beside this module) in this process and the
    processes it starts, unless the user configured DDS (module doc); whether it will."""
    if os.environ.get('RMW_IMPLEMENTATION', 'rmw_fastrtps_cpp') != 'rmw_fastrtps_cpp':
        return False
    if any(os.environ.get(setting) for setting in DDS_SETTINGS) or any(
            Path(file).is_file() for file in DDS_FILES):
        return False
    os.environ['FASTDDS_DEFAULT_PROFILES_FILE'] = str(Path(__file__).with_name(name))
    return True
